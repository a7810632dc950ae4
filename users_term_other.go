//go:build !linux

package main

import (
	"io"
	"os"
)

// readTerminalPassword is not available here: the password is read as a
// line of standard input (ok false), as when it is piped in.
func readTerminalPassword(f *os.File, prompt io.Writer, name string) (string, bool, error) {
	return "", false, nil
}
