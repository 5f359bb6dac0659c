package proctest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestLogsCountOverEveryFile(t *testing.T) {
	l := NewLogs(t, 100)
	a, b := l.Create("a-*.log"), l.Create("b-*.log")
	defer a.Close()
	defer b.Close()
	if _, err := a.WriteString("ready\nready\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteString("ready\nstopping\n"); err != nil {
		t.Fatal(err)
	}
	if got := l.Count("ready"); got != 3 {
		t.Errorf("Count(ready) = %d, want 3 over both files", got)
	}
	if fs := l.Files(); len(fs) != 2 || !strings.Contains(fs[0], "a-") || !strings.Contains(fs[1], "b-") {
		t.Errorf("Files = %v, want a's then b's", fs)
	}
	l.Wait("stopping", 1, time.Second)
}

// fatalTB is the test's TB, except that Fatalf records its message and ends the goroutine it
// runs in.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestLogsWaitFailsAfterItsBound(t *testing.T) {
	ft := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewLogs(ft, 100).Wait("never", 1, 50*time.Millisecond)
	}()
	<-done
	if !strings.Contains(ft.msg, `fewer than 1 output lines with "never" after 50ms`) {
		t.Fatalf("Wait failed with %q", ft.msg)
	}
}
