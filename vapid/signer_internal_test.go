package vapid

import (
	"fmt"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
)

var it0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newInternalSigner(t *testing.T, now func() time.Time) (*Signer, *Key) {
	t.Helper()
	s, err := NewSigner(SignerOptions{Subject: "mailto:push@example.com", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	k, err := GenerateKey("main")
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// failAfter fails the test if ch yields nothing within a generous deadline:
// a deadlock shows up as a clear failure, not a test-binary timeout.
func failAfter[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return timetest.Receive(t, ch, 10*time.Second, what)
}

// TestSigningRunsInParallel: while one audience's signature is held up, a
// caller for another audience signs and returns, and a second caller for the
// held audience waits for the first signature instead of making its own.
func TestSigningRunsInParallel(t *testing.T) {
	s, key := newInternalSigner(t, func() time.Time { return it0 })
	const slow, fast = "https://slow.example.net", "https://fast.example.net"
	entered := make(chan struct{})
	release := make(chan struct{})
	s.signHook = func(aud string) {
		if aud == slow {
			close(entered) // a second signature for slow would panic here
			<-release
		}
	}
	type result struct {
		h   string
		err error
	}
	call := func(aud string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			h, err := s.Header(key, aud, 0)
			ch <- result{h, err}
		}()
		return ch
	}

	slow1 := call(slow)
	failAfter(t, entered, "signing for the slow audience")
	slow2 := call(slow)
	if r := failAfter(t, call(fast), "signing another audience while one is in progress"); r.err != nil {
		t.Fatal(r.err)
	}
	if got := s.Signatures(); got != 1 {
		t.Fatalf("Signatures while slow is held = %d, want 1 (fast only)", got)
	}
	close(release)
	r1 := failAfter(t, slow1, "first slow caller")
	r2 := failAfter(t, slow2, "second slow caller")
	if r1.err != nil || r2.err != nil {
		t.Fatalf("errors: %v, %v", r1.err, r2.err)
	}
	if r1.h != r2.h {
		t.Errorf("the two slow callers got different headers")
	}
	if got := s.Signatures(); got != 2 {
		t.Errorf("Signatures = %d, want 2", got)
	}
}

// TestPanicDoesNotPoisonEntry: a signature that panics leaves no entry
// behind, so the next call signs instead of waiting forever.
func TestPanicDoesNotPoisonEntry(t *testing.T) {
	s, key := newInternalSigner(t, func() time.Time { return it0 })
	const aud = "https://push.example.net"
	s.signHook = func(string) { panic("boom") }
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Header did not panic")
			}
		}()
		_, _ = s.Header(key, aud, 0)
	}()
	if n := s.entries.Load(); n != 0 {
		t.Fatalf("entries after a panic = %d, want 0", n)
	}
	s.signHook = nil
	done := make(chan error, 1)
	go func() {
		_, err := s.Header(key, aud, 0)
		done <- err
	}()
	if err := failAfter(t, done, "Header after a panicked signature"); err != nil {
		t.Fatal(err)
	}
	if got := s.Signatures(); got != 1 {
		t.Errorf("Signatures = %d, want 1", got)
	}
}

func countEntries(s *Signer) int64 {
	var n int64
	s.cache.Range(func(any, any) bool { n++; return true })
	return n
}

func cached(s *Signer, key *Key, aud string) bool {
	_, ok := s.cache.Load(cacheKey{key: key.id, aud: aud})
	return ok
}

func aud(i int) string { return fmt.Sprintf("https://push%d.example.net", i) }

// TestCacheBound: the cache never holds more than its limit; stale entries
// go first, then the oldest.
func TestCacheBound(t *testing.T) {
	const limit = 16
	tests := []struct {
		name string
		// run drives the signer through a settable clock
		run func(t *testing.T, s *Signer, key *Key, set func(time.Time))
	}{
		{name: "never over the limit", run: func(t *testing.T, s *Signer, key *Key, set func(time.Time)) {
			for i := range 5 * limit {
				set(it0.Add(time.Duration(i) * time.Second))
				if _, err := s.Header(key, aud(i), 0); err != nil {
					t.Fatal(err)
				}
				if n, m := s.entries.Load(), countEntries(s); n > limit || n != m {
					t.Fatalf("after %d inserts: counter %d, map %d, limit %d", i+1, n, m, limit)
				}
			}
			// The newest entry survived and is still a hit.
			before := s.Signatures()
			if _, err := s.Header(key, aud(5*limit-1), 0); err != nil {
				t.Fatal(err)
			}
			if s.Signatures() != before {
				t.Errorf("newest entry was evicted")
			}
		}},
		{name: "stale entries go first", run: func(t *testing.T, s *Signer, key *Key, set func(time.Time)) {
			for i := range limit {
				set(it0.Add(time.Duration(i) * time.Second))
				if _, err := s.Header(key, aud(i), 0); err != nil {
					t.Fatal(err)
				}
			}
			// All 16 are due for refresh now; inserting a 17th drops them all.
			set(it0.Add(DefaultLifetime))
			if _, err := s.Header(key, aud(limit), 0); err != nil {
				t.Fatal(err)
			}
			if n := countEntries(s); n != 1 || !cached(s, key, aud(limit)) {
				t.Errorf("entries = %d (newest cached: %v), want only the newest", n, cached(s, key, aud(limit)))
			}
		}},
		{name: "oldest go next, down to 15/16", run: func(t *testing.T, s *Signer, key *Key, set func(time.Time)) {
			for i := range limit {
				set(it0.Add(time.Duration(i) * time.Second))
				if _, err := s.Header(key, aud(i), 0); err != nil {
					t.Fatal(err)
				}
			}
			set(it0.Add(time.Hour)) // all still fresh
			if _, err := s.Header(key, aud(limit), 0); err != nil {
				t.Fatal(err)
			}
			// 17 entries, target 15: the two oldest (0 and 1) are gone.
			for i := range limit + 1 {
				if want := i >= 2; cached(s, key, aud(i)) != want {
					t.Errorf("%s cached = %v, want %v", aud(i), !want, want)
				}
			}
			if n := s.entries.Load(); n != limit-limit/16 {
				t.Errorf("entries = %d, want %d", n, limit-limit/16)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Time
			s, key := newInternalSigner(t, func() time.Time { return now })
			s.maxEntries = limit
			tc.run(t, s, key, func(t time.Time) { now = t })
		})
	}
}
