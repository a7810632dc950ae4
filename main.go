// Command pacer sends API operations to third-party providers for many
// accounts without hammering their rate limits: see README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// version is the release this binary reports; set at build time with
// -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	tuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if code, msg := exitStatus(err); code != 0 {
		if msg != "" {
			fmt.Fprintln(os.Stderr, "pacer:", msg)
		}
		os.Exit(code)
	}
}

// exitStatus is the exit code of a command that returned err, and the one
// line to print: a cli.ExitCoder's own code, 1 for any other error, 0 for
// none.
func exitStatus(err error) (code int, msg string) {
	if err == nil {
		return 0, ""
	}
	var exit cli.ExitCoder
	if errors.As(err, &exit) {
		return exit.ExitCode(), exit.Error()
	}
	return 1, err.Error()
}

// newApp lists pacer's commands.
func newApp() *cli.App {
	app := &cli.App{
		Name:                 "pacer",
		Usage:                "send API operations to providers without hammering their rate limits",
		Version:              version,
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // main prints and exits
		Commands: []*cli.Command{
			serveCommand(),
			enqueueCommand(), opsCommand(), scopesCommand(), followCommand(),
			backupCommand(), checkCommand(),
			usersCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					_, err := fmt.Fprintln(c.App.Writer, "pacer", version)
					return err
				},
			},
		},
	}
	withEnvVars(app.Commands)
	oneLineUsageErrors(app.Commands)
	app.OnUsageError = usageError
	// A word that names no command is a usage error of its own (urfave's
	// default prints "No help topic" and exits 3, the code for "no such
	// operation").
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return exitf(exitUsage, "unknown command %q: see pacer --help", c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	return app
}

// usageError words a flag that does not parse as one line and exit code 2,
// for every command alike (urfave's default prints the whole help and
// exits 1).
func usageError(c *cli.Context, err error, _ bool) error {
	return exitf(exitUsage, "%v (see pacer %s --help)", err, strings.TrimSpace(commandPath(c)))
}

// oneLineUsageErrors gives every command usageError.
func oneLineUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		oneLineUsageErrors(c.Subcommands)
	}
}
