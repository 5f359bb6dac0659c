package proctest

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// Main is a command's main without the process, as the commands' runMain are.
type Main func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Run calls main in-process with args and returns its exit code, standard output and standard
// error.
func Run(t testing.TB, main Main, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}
