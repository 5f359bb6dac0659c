package cli

import "testing"

// TestDashAndPrintable: text read from Redis prints as it is unless it could forge a row or
// drive the terminal; Printable also quotes what a space would make ambiguous.
func TestDashAndPrintable(t *testing.T) {
	for _, c := range []struct{ in, dash, printable string }{
		{"", "-", "-"},
		{"fcm", "fcm", "fcm"},
		{"job 1", "job 1", `"job 1"`},
		{"a\tb", `"a\tb"`, `"a\tb"`},
		{"x\ny", `"x\ny"`, `"x\ny"`},
		{"\x1b[31m", `"\x1b[31m"`, `"\x1b[31m"`},
		{"\xff", `"\xff"`, `"\xff"`},
	} {
		if got := Dash(c.in); got != c.dash {
			t.Errorf("Dash(%q) = %s, want %s", c.in, got, c.dash)
		}
		if got := Printable(c.in); got != c.printable {
			t.Errorf("Printable(%q) = %s, want %s", c.in, got, c.printable)
		}
	}
}
