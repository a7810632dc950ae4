package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"pacer/httpapi"
)

// grantFlags are scopes set's flags of the renewing grants (design §13):
// oauth2 and githubApp. Their secrets (client secret, refresh token,
// private key) come from a file or an environment variable, never from
// the command line.
func grantFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "token-url", Usage: "oauth2: the token endpoint (https)"},
		&cli.StringFlag{Name: "client-id", Usage: "oauth2: the client ID"},
		&cli.StringFlag{Name: "client-secret-file", Usage: "oauth2: file holding the client secret"},
		&cli.StringFlag{Name: "client-secret-env", Usage: "oauth2: name of the environment variable holding the client secret"},
		&cli.StringFlag{Name: "refresh-token-file", Usage: "oauth2: file holding the refresh token (without one: the client credentials grant)"},
		&cli.StringFlag{Name: "refresh-token-env", Usage: "oauth2: name of the environment variable holding the refresh token"},
		&cli.StringSliceFlag{Name: "scope", Usage: "oauth2: a scope to ask for (repeat for more)"},
		&cli.StringFlag{Name: "auth-style", Usage: "oauth2: how the client authenticates to the token endpoint: header (HTTP Basic), params (form body) or auto"},
		&cli.Int64Flag{Name: "app-id", Usage: "githubApp: the app's ID"},
		&cli.Int64Flag{Name: "installation-id", Usage: "githubApp: the installation's ID"},
		&cli.StringFlag{Name: "private-key-file", Usage: "githubApp: file holding the app's private key (PEM)"},
		&cli.StringFlag{Name: "private-key-env", Usage: "githubApp: name of the environment variable holding the private key (PEM)"},
	}
}

// grantFlagNames are the flags of grantFlags, for the checks that they
// go with their type.
var grantFlagNames = []string{"token-url", "client-id", "client-secret-file", "client-secret-env", "refresh-token-file",
	"refresh-token-env", "scope", "auth-style", "app-id", "installation-id", "private-key-file", "private-key-env"}

// grantFromFlags builds an oauth2 or githubApp grant (typ) from the
// flags. The server checks the values; this checks that each secret is
// given once, from a file or the environment.
func grantFromFlags(c *cli.Context, typ string) (*httpapi.CredentialsRequest, error) {
	if c.IsSet("token-file") || c.IsSet("token-env") || c.IsSet("header-name") || c.IsSet("username") {
		return nil, exitf(exitUsage, "--credentials %s takes its own secrets (see pacer scopes set --help), not --token-file, --token-env, --header-name or --username", typ)
	}
	cr := &httpapi.CredentialsRequest{Type: typ}
	var err error
	switch typ {
	case "oauth2":
		if err := onlyFlags(c, typ, "app-id", "installation-id", "private-key-file", "private-key-env"); err != nil {
			return nil, err
		}
		cr.TokenURL, cr.ClientID, cr.Scopes, cr.AuthStyle = c.String("token-url"), c.String("client-id"), c.StringSlice("scope"), c.String("auth-style")
		if cr.ClientSecret, err = secretFrom(c, "client-secret"); err != nil {
			return nil, err
		}
		if cr.RefreshToken, err = secretFrom(c, "refresh-token"); err != nil {
			return nil, err
		}
		if cr.TokenURL == "" || cr.ClientID == "" {
			return nil, exitf(exitUsage, "--credentials oauth2 needs --token-url and --client-id")
		}
	case "githubApp":
		if err := onlyFlags(c, typ, "token-url", "client-id", "client-secret-file", "client-secret-env", "refresh-token-file", "refresh-token-env", "scope", "auth-style"); err != nil {
			return nil, err
		}
		cr.AppID, cr.InstallationID = c.Int64("app-id"), c.Int64("installation-id")
		if cr.PrivateKey, err = secretFrom(c, "private-key"); err != nil {
			return nil, err
		}
		if cr.PrivateKey == "" {
			return nil, exitf(exitUsage, "--credentials githubApp needs --private-key-file or --private-key-env")
		}
	}
	return cr, nil
}

// onlyFlags refuses the flags named, which do not go with typ.
func onlyFlags(c *cli.Context, typ string, others ...string) error {
	for _, f := range others {
		if c.IsSet(f) {
			return exitf(exitUsage, "--%s does not go with --credentials %s", f, typ)
		}
	}
	return nil
}

// secretFrom reads the secret of --NAME-file or --NAME-env ("" when
// neither is given), refusing both at once.
func secretFrom(c *cli.Context, name string) (string, error) {
	file, env := c.String(name+"-file"), c.String(name+"-env")
	switch {
	case file != "" && env != "":
		return "", exitf(exitUsage, "give the %s once: --%s-file or --%s-env", strings.ReplaceAll(name, "-", " "), name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", exitf(exitUsage, "read --%s-file: %v", name, err)
		}
		if name == "private-key" {
			return string(b), nil // PEM keeps its lines
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return "", exitf(exitUsage, "--%s-env: the environment variable %s is not set", name, env)
		}
		return v, nil
	}
	return "", nil
}

// grantStatus shows a renewing grant's token: when it expires and the
// last refresh's result.
func grantStatus(c httpapi.CredentialsStatus) string {
	s := "token expires " + showTime(c.TokenExpiresAt)
	if c.LastRefreshAt != nil {
		s += ", last refresh " + showTime(c.LastRefreshAt) + ": " + showString(c.LastRefreshResult)
	}
	return s
}
