package main

import (
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"
)

// withEnvVars gives every flag of cmds (and their subcommands) that names
// no environment variable its default one, PACER_ and the flag's name in
// upper case with '-' as '_' (--base-url: PACER_BASE_URL), so that every
// flag has an environment variable (design §9). Flags that name their own
// keep it. Every urfave/cli flag type has an EnvVars field; the test
// TestEveryFlagHasAnEnvironmentVariable checks none is missed.
func withEnvVars(cmds []*cli.Command) {
	for _, c := range cmds {
		for _, f := range c.Flags {
			field := reflect.ValueOf(f).Elem().FieldByName("EnvVars")
			if field.IsValid() && field.Len() == 0 {
				env := "PACER_" + strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
				field.Set(reflect.ValueOf([]string{env}))
			}
		}
		withEnvVars(c.Subcommands)
	}
}
