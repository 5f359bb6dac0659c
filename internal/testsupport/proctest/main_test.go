package proctest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestRunReturnsCodeAndOutputs(t *testing.T) {
	main := func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		fmt.Fprint(stdout, strings.Join(args, " "))
		fmt.Fprint(stderr, "warned")
		return 3
	}
	if code, out, errOut := Run(t, main, "a", "b"); code != 3 || out != "a b" || errOut != "warned" {
		t.Fatalf("Run = %d, %q, %q; want 3, \"a b\", \"warned\"", code, out, errOut)
	}
}
