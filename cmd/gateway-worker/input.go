package main

import (
	"io"
	"os"
)

// openInput opens the FILE argument of a command that reads a file of lines, standard input
// when it is "-" or not given, and names it for the command's messages ("standard input" or
// the path). The caller closes it; closing standard input this way does nothing.
func openInput(arg string) (in io.ReadCloser, name string, err error) {
	if arg == "" || arg == "-" {
		return io.NopCloser(os.Stdin), "standard input", nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, "", err
	}
	return f, arg, nil
}
