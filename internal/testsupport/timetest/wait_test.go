package timetest

import (
	"testing"
	"time"
)

func TestReceiveReturnsTheValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(t, ch, time.Second, "seven"); got != 7 {
		t.Fatalf("Receive = %d, want 7", got)
	}
}
