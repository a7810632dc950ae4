package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every flag of every command has a PACER_ environment variable (design
// §9); a flag of a type withEnvVars does not know fails here.
func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	t.Parallel()
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				ev, ok := f.(interface{ GetEnvVars() []string })
				if !ok || len(ev.GetEnvVars()) == 0 || !strings.HasPrefix(ev.GetEnvVars()[0], "PACER_") {
					t.Errorf("%s %s --%s has no PACER_ environment variable", path, c.Name, f.Names()[0])
				}
			}
			walk(path+" "+c.Name, c.Subcommands)
		}
	}
	walk("pacer", newApp().Commands)
}
