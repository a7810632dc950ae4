//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// readTerminalPassword asks for a password on the terminal f without
// echoing it, twice, and returns it. ok is false when f is not a terminal
// (the caller reads a line instead).
func readTerminalPassword(f *os.File, prompt io.Writer, name string) (password string, ok bool, err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", false, nil // not a terminal
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", false, fmt.Errorf("turn off terminal echo: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)

	in := bufio.NewReader(f)
	ask := func(label string) (string, error) {
		fmt.Fprint(prompt, label)
		line, err := in.ReadString('\n')
		fmt.Fprintln(prompt)
		if err != nil {
			return "", errors.New("read the password: no input")
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	first, err := ask("Password for " + name + ": ")
	if err != nil {
		return "", true, err
	}
	again, err := ask("Again: ")
	if err != nil {
		return "", true, err
	}
	if first != again {
		return "", true, errors.New("the two passwords differ; nothing was changed")
	}
	return first, true, nil
}
