package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/benbjohnson/clock"
	"github.com/urfave/cli/v2"

	"pacer/internal/staff"
	"pacer/pgstore"
	"pacer/scheduler"
)

// usersCommand manages the staff accounts that sign in to the support
// page (/ui). Each subcommand opens the database named by --db.
func usersCommand() *cli.Command {
	flags := func() []cli.Flag {
		return []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "secret-key", EnvVars: []string{"PACER_SECRET_KEY"}, Usage: "base64 32-byte key that encrypts scope credentials (as for serve)"},
			&cli.StringFlag{Name: "secret-key-file", EnvVars: []string{"PACER_SECRET_KEY_FILE"}, Usage: "file holding the base64 key (default: DB.key beside a SQLite database; on PostgreSQL this or --secret-key is required)"},
		}
	}
	return &cli.Command{
		Name:  "users",
		Usage: "manage the staff accounts of the support page (/ui)",
		Description: "Without any account the support page is open only on a loopback address of a server\n" +
			"without an API token; once one exists, /ui asks everyone to sign in.",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a staff account",
				ArgsUsage: "NAME",
				Description: "The password is asked for on the terminal (not shown as you type), or read as one\n" +
					"line from standard input:\n\n" +
					"   printf '%s\\n' \"$PASSWORD\" | pacer users add alice\n\n" +
					fmt.Sprintf("It needs at least %d characters (at most %d bytes). It is stored as a bcrypt hash.", staff.MinPasswordLength, staff.MaxPasswordBytes),
				Flags: append(flags(), &cli.StringFlag{Name: "role", Value: scheduler.RoleOperator,
					Usage: "viewer (looks at everything, acts on nothing) or operator (looks and acts)"}),
				Action: runUsersAdd,
			},
			{
				Name:        "passwd",
				Usage:       "set a staff account's password",
				ArgsUsage:   "NAME",
				Description: "The new password is read as for add. The account's sessions end and it is unlocked.",
				Flags:       flags(),
				Action:      runUsersPasswd,
			},
			{
				Name:      "unlock",
				Usage:     "let a staff account sign in again",
				ArgsUsage: "NAME",
				Description: fmt.Sprintf("An account is locked after %d failed sign-ins in a row; its password is unchanged.",
					scheduler.MaxFailedSignIns),
				Flags:  flags(),
				Action: runUsersUnlock,
			},
			{
				Name:   "list",
				Usage:  "list the staff accounts",
				Flags:  flags(),
				Action: runUsersList,
			},
			{
				Name:        "remove",
				Usage:       "remove a staff account and end its sessions",
				ArgsUsage:   "NAME",
				Flags:       flags(),
				Description: "The account's open sessions end at once.",
				Action:      runUsersRemove,
			},
		},
	}
}

// openUsersDB opens the database of a users subcommand: a SQLite file
// or a PostgreSQL URL, which must hold a pacer database already; on
// PostgreSQL the command is no node (pgstore.Options.NoNode): it runs no
// scheduler, so the serves sharing the database never see it.
func openUsersDB(c *cli.Context) (staffStore, error) {
	path := c.String("db")
	if pgstore.IsURL(path) {
		return openPostgres(c.Context, path, c.String("secret-key"), c.String("secret-key-file"), pgstore.Options{MustExist: true, NoNode: true})
	}
	return openSQLiteForCommand(c, path)
}

// oneName returns the single NAME argument of a subcommand.
func oneName(c *cli.Context) (string, error) {
	args, err := operands(c) // flags may follow the name, as for every command
	if err != nil {
		return "", err
	}
	if len(args) != 1 {
		return "", cli.Exit(fmt.Sprintf("users %s takes one argument, the account NAME (got %d)", c.Command.Name, len(args)), 2)
	}
	return args[0], nil
}

func runUsersAdd(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	if err := staff.Validate(name, strings.Repeat("x", staff.MinPasswordLength)); err != nil {
		return cli.Exit(usersErrLine(err), 2)
	}
	password, err := readPassword(c, name)
	if err != nil {
		return cli.Exit(errLine(err), 2)
	}
	if err := staff.Validate(name, password); err != nil {
		return cli.Exit(usersErrLine(err), 2)
	}
	store, err := openUsersDB(c)
	if err != nil {
		return err
	}
	defer store.Close()
	role := c.String("role")
	if role != scheduler.RoleViewer && role != scheduler.RoleOperator {
		return cli.Exit(fmt.Sprintf("--role %q: must be viewer (looks, acts on nothing) or operator (looks and acts)", role), 2)
	}
	if err := store.AddUser(c.Context, staff.NewUser{Name: name, Password: password, Role: role}, clock.New().Now().UTC()); err != nil {
		if errors.Is(err, scheduler.ErrConflict) {
			return cli.Exit(fmt.Sprintf("a staff account %q exists already: remove it first (pacer users remove %s) to set a new password", name, name), 1)
		}
		return cli.Exit(usersErrLine(err), 1)
	}
	_, err = fmt.Fprintf(c.App.Writer, "added staff account %s (%s): the support page (/ui) now asks everyone to sign in\n", name, role)
	return err
}

func runUsersPasswd(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	password, err := readPassword(c, name)
	if err != nil {
		return cli.Exit(errLine(err), 2)
	}
	if err := staff.Validate(name, password); err != nil {
		return cli.Exit(usersErrLine(err), 2)
	}
	return usersUpdate(c, name, func(store staffStore) error { return store.SetPassword(c.Context, name, password, 0) },
		"set the password of staff account %s, ended its sessions and unlocked it\n")
}

func runUsersUnlock(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	return usersUpdate(c, name, func(store staffStore) error { return store.UnlockUser(c.Context, name) },
		"unlocked staff account %s: it can sign in again\n")
}

// usersUpdate opens the database, runs update on the account name and
// prints done (a format taking the name).
func usersUpdate(c *cli.Context, name string, update func(staffStore) error, done string) error {
	store, err := openUsersDB(c)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := update(store); err != nil {
		if errors.Is(err, scheduler.ErrNotFound) {
			return cli.Exit(fmt.Sprintf("no staff account %q (see pacer users list)", name), 1)
		}
		return cli.Exit(usersErrLine(err), 1)
	}
	_, err = fmt.Fprintf(c.App.Writer, done, name)
	return err
}

func runUsersList(c *cli.Context) error {
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("users list takes no arguments (got %q)", c.Args().First()), 2)
	}
	store, err := openUsersDB(c)
	if err != nil {
		return err
	}
	defer store.Close()
	users, err := store.ListUsers(c.Context)
	if err != nil {
		return cli.Exit(errLine(err), 1)
	}
	if len(users) == 0 {
		_, err := fmt.Fprintln(c.App.ErrWriter, "no staff accounts: add one with pacer users add NAME")
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATE\tCREATED (UTC)")
	for _, u := range users {
		state := "active"
		if u.Locked {
			state = "locked (pacer users unlock " + u.Name + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.Role, state, u.CreatedAt.Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}

func runUsersRemove(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	store, err := openUsersDB(c)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.RemoveUser(c.Context, name); err != nil {
		if errors.Is(err, scheduler.ErrNotFound) {
			return cli.Exit(fmt.Sprintf("no staff account %q (see pacer users list)", name), 1)
		}
		return cli.Exit(errLine(err), 1)
	}
	_, err = fmt.Fprintf(c.App.Writer, "removed staff account %s and ended its sessions\n", name)
	return err
}

// usersErrLine words a users error in one line, naming invalid fields.
func usersErrLine(err error) string {
	var ve *scheduler.ValidationError
	if errors.As(err, &ve) {
		parts := make([]string, len(ve.Fields))
		for i, f := range ve.Fields {
			parts[i] = f.Field + " " + f.Message
		}
		return strings.Join(parts, "; ")
	}
	return errLine(err)
}

// readPassword reads the new account's password: from the terminal
// without echo (asked twice), or else as the first line of standard input.
func readPassword(c *cli.Context, name string) (string, error) {
	if f, ok := c.App.Reader.(*os.File); ok {
		if pw, ok, err := readTerminalPassword(f, c.App.ErrWriter, name); ok || err != nil {
			return pw, err
		}
	}
	line, err := bufio.NewReader(c.App.Reader).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", errors.New("read the password: give it as one line on standard input, e.g. printf '%s\\n' \"$PASSWORD\" | pacer users add NAME")
	}
	return strings.TrimRight(line, "\r\n"), nil
}
