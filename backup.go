package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"pacer/db"
	"pacer/pgstore"
)

// backupCommand writes a consistent copy of a database, live or not.
func backupCommand() *cli.Command {
	return &cli.Command{
		Name:  "backup",
		Usage: "write a consistent copy of the database to a new file (safe while serve runs)",
		Description: "The copy (SQLite VACUUM INTO) holds everything committed when it began; serve keeps\n" +
			"running and writing meanwhile. It does not take the process lock and needs no key.\n" +
			"The credentials key file is not part of the database: back it up too. On PostgreSQL\n" +
			"it refuses: back up with pg_dump.",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "to", EnvVars: []string{"PACER_BACKUP_TO"}, Usage: "the new file to write the copy to (must not exist)"},
		},
		Action: runBackup,
	}
}

func runBackup(c *cli.Context) error {
	if pgstore.IsURL(c.String("db")) {
		return cli.Exit(fmt.Sprintf("pacer backup copies SQLite files only: back up the PostgreSQL database %s with pg_dump (e.g. pg_dump --format=custom --file=pacer.dump URL), and keep the credentials key with the dump", pgstore.Redact(c.String("db"))), 2)
	}
	to := c.String("to")
	if to == "" {
		return cli.Exit("backup needs --to FILE: the new file to write the copy to", 2)
	}
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("backup takes no arguments (got %q): name the copy with --to FILE", c.Args().First()), 2)
	}
	from := c.String("db")
	if err := db.BackupFile(c.Context, from, to); err != nil {
		return cli.Exit(errLine(err), 1)
	}
	size := ""
	if fi, err := os.Stat(to); err == nil {
		size = fmt.Sprintf(" (%d bytes)", fi.Size())
	}
	_, err := fmt.Fprintf(c.App.Writer, "backed up %s to %s%s; the credentials key is not in it: keep the key file (by default %s.key) with it\n", from, to, size, from)
	return err
}

// checkCommand verifies a database file.
func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "verify a database: SQLite integrity, foreign keys and schema version; on PostgreSQL connectivity and schema version",
		Description: "Exits 0 and prints one line when the database is sound, exits 1 with a one-line\n" +
			"message otherwise. It only reads: safe on a live database and on backups. It needs no key.",
		Flags:  []cli.Flag{dbFlag()},
		Action: runCheck,
	}
}

func runCheck(c *cli.Context) error {
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("check takes no arguments (got %q): name the file with --db FILE", c.Args().First()), 2)
	}
	path := c.String("db")
	if pgstore.IsURL(path) {
		version, err := pgstore.Check(c.Context, path)
		if err != nil {
			return cli.Exit(fmt.Sprintf("%s: %s", pgstore.Redact(path), errLine(err)), 1)
		}
		_, err = fmt.Fprintf(c.App.Writer, "ok: %s: connected, schema version %d\n", pgstore.Redact(path), version)
		return err
	}
	version, err := db.CheckFile(c.Context, path)
	if err != nil {
		return cli.Exit(errLine(err), 1)
	}
	_, err = fmt.Fprintf(c.App.Writer, "ok: %s: integrity ok, schema version %d\n", path, version)
	return err
}

// errLine joins a multi-line error (errors.Join) into one line.
func errLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
