package limits_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

func mustAcquire(t *testing.T, s *limits.Slots, retry bool, recipient string) {
	t.Helper()
	if err := s.TryAcquire(retry, recipient); err != nil {
		t.Fatalf("TryAcquire(%v, %q): %v", retry, recipient, err)
	}
}

func wantAcquireErr(t *testing.T, s *limits.Slots, retry bool, recipient string, want error) {
	t.Helper()
	if err := s.TryAcquire(retry, recipient); !errors.Is(err, want) {
		t.Fatalf("TryAcquire(%v, %q) = %v, want %v", retry, recipient, err, want)
	}
}

func TestSlotsCap(t *testing.T) {
	s := limits.NewSlots(limits.SlotsConfig{Cap: 2})
	mustAcquire(t, s, false, "")
	mustAcquire(t, s, false, "")
	wantAcquireErr(t, s, false, "", limits.ErrNoCapacity)
	wantAcquireErr(t, s, true, "r", limits.ErrNoCapacity) // a full cap wins over the other checks
	if got := [3]int{s.Free(), s.InFlight(), s.Cap()}; got != [3]int{0, 2, 2} {
		t.Fatalf("Free, InFlight, Cap = %v, want [0 2 2]", got)
	}
	s.Release(false, "")
	if got := [3]int{s.Free(), s.InFlight(), s.Cap()}; got != [3]int{1, 1, 2} {
		t.Fatalf("after Release: Free, InFlight, Cap = %v, want [1 1 2]", got)
	}
	if got := limits.NewSlots(limits.SlotsConfig{Cap: 0}).Cap(); got != 1 {
		t.Fatalf("Cap 0 gives Cap() %d, want 1", got)
	}
}

func TestSlotsRetryShare(t *testing.T) {
	tests := []struct {
		name     string
		cap      int
		share    float64
		retryCap int
	}{
		{"half of 10", 10, 0.5, 5},
		{"0.07 of 100 is 7, not 8 (float error)", 100, 0.07, 7},
		{"0.3 of 10", 10, 0.3, 3},
		{"0.25 of 10 rounds up", 10, 0.25, 3},
		{"half of 3 rounds up", 3, 0.5, 2},
		{"at least 1", 5, 0.01, 1},
		{"half of 1", 1, 0.5, 1},
		{"share 1: retries may take all", 4, 1, 4},
		{"share 0 is the default 0.5", 10, 0, 5},
		{"share above 1 is the default 0.5", 10, 1.5, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := limits.NewSlots(limits.SlotsConfig{Cap: tc.cap, RetryShare: tc.share})
			if got := s.RetryCap(); got != tc.retryCap {
				t.Fatalf("RetryCap = %d, want %d", got, tc.retryCap)
			}
			for range tc.retryCap {
				mustAcquire(t, s, true, "")
			}
			if tc.retryCap < tc.cap {
				wantAcquireErr(t, s, true, "", limits.ErrRetryShare)
				mustAcquire(t, s, false, "") // first deliveries still go
				s.Release(true, "")
				mustAcquire(t, s, true, "") // a released retry slot is a retry slot again
			}
		})
	}
}

func TestSlotsPerRecipient(t *testing.T) {
	tests := []struct {
		name         string
		perRecipient int
		recipient    string
		fits         int // acquisitions for recipient that succeed in a cap of 20
	}{
		{"configured cap", 2, "r", 2},
		{"0 is no cap", 0, "r", 20},
		{"negative is no cap too", -1, "r", 20},
		{"the empty recipient has no cap", 2, "", 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := limits.NewSlots(limits.SlotsConfig{Cap: 20, PerRecipient: tc.perRecipient})
			for range tc.fits {
				mustAcquire(t, s, false, tc.recipient)
			}
			if tc.fits < 20 {
				wantAcquireErr(t, s, false, tc.recipient, limits.ErrRecipientBusy)
				mustAcquire(t, s, false, "other") // another recipient still fits
				s.Release(false, tc.recipient)
				mustAcquire(t, s, true, tc.recipient) // retry or not, the same recipient count
				wantAcquireErr(t, s, false, tc.recipient, limits.ErrRecipientBusy)
			} else {
				wantAcquireErr(t, s, false, tc.recipient, limits.ErrNoCapacity)
			}
		})
	}
}

func TestSlotsSetCap(t *testing.T) {
	s := limits.NewSlots(limits.SlotsConfig{Cap: 4, RetryShare: 0.5})
	for range 4 {
		mustAcquire(t, s, false, "")
	}
	s.SetCap(2)
	steps := []struct {
		name     string
		release  bool
		free     int
		inFlight int
	}{
		{"lowered below InFlight: nothing taken away", false, 0, 4},
		{"one released, still above the cap", true, 0, 3},
		{"at the cap", true, 0, 2},
		{"below the cap", true, 1, 1},
	}
	for _, st := range steps {
		if st.release {
			s.Release(false, "")
		}
		if got := [2]int{s.Free(), s.InFlight()}; got != [2]int{st.free, st.inFlight} {
			t.Fatalf("%s: Free, InFlight = %v, want [%d %d]", st.name, got, st.free, st.inFlight)
		}
	}
	if got := s.RetryCap(); got != 1 {
		t.Fatalf("RetryCap after SetCap(2) = %d, want 1", got)
	}
	mustAcquire(t, s, false, "")
	wantAcquireErr(t, s, false, "", limits.ErrNoCapacity)
	s.SetCap(10)
	if got := [3]int{s.Free(), s.Cap(), s.RetryCap()}; got != [3]int{8, 10, 5} {
		t.Fatalf("after SetCap(10): Free, Cap, RetryCap = %v, want [8 10 5]", got)
	}
}

func TestSlotsReleaseWithoutAcquirePanics(t *testing.T) {
	tests := []struct {
		name    string
		acquire func(s *limits.Slots) error
		retry   bool
		rcpt    string
	}{
		{"nothing in flight", nil, false, ""},
		{"a retry release of a first delivery", func(s *limits.Slots) error { return s.TryAcquire(false, "") }, true, ""},
		{"another recipient", func(s *limits.Slots) error { return s.TryAcquire(false, "a") }, false, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := limits.NewSlots(limits.SlotsConfig{Cap: 2})
			if tc.acquire != nil {
				if err := tc.acquire(s); err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				if recover() == nil {
					t.Fatal("Release did not panic")
				}
			}()
			s.Release(tc.retry, tc.rcpt)
		})
	}
}

// Wait blocks on a channel, never polls: inside a synctest bubble synctest.Wait returns only
// once the waiter is durably blocked, and the waiter must then still be waiting.
func TestSlotsWait(t *testing.T) {
	tests := []struct {
		name string
		wake func(s *limits.Slots, cancel context.CancelFunc)
		want error
	}{
		{"Release wakes it", func(s *limits.Slots, _ context.CancelFunc) { s.Release(false, "") }, nil},
		{"SetCap up wakes it", func(s *limits.Slots, _ context.CancelFunc) { s.SetCap(2) }, nil},
		{"ctx cancel wakes it", func(_ *limits.Slots, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"ctx deadline wakes it", func(_ *limits.Slots, _ context.CancelFunc) { time.Sleep(time.Hour) }, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := limits.NewSlots(limits.SlotsConfig{Cap: 1})
				if err := s.Wait(context.Background()); err != nil {
					t.Fatalf("Wait with a free slot: %v", err)
				}
				mustAcquire(t, s, false, "")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var got atomic.Pointer[error]
				go func() {
					err := s.Wait(ctx)
					got.Store(&err)
				}()
				synctest.Wait()
				if got.Load() != nil {
					t.Fatal("Wait returned while every slot was taken")
				}
				s.SetCap(1) // frees nothing: must not wake it
				synctest.Wait()
				if got.Load() != nil {
					t.Fatal("Wait returned on a SetCap that freed nothing")
				}
				tc.wake(s, cancel)
				synctest.Wait()
				err := got.Load()
				if err == nil {
					t.Fatal("Wait still blocked")
				}
				if !errors.Is(*err, tc.want) {
					t.Fatalf("Wait = %v, want %v", *err, tc.want)
				}
			})
		})
	}
}

// Many goroutines acquire and release at once; counters kept by the test (not by Slots) must
// never exceed the cap, the retry share or the per-recipient cap. Run with -race.
func TestSlotsHammer(t *testing.T) {
	const (
		capN      = 8
		retryCapN = 3 // ceil(8 * 0.3)
		perRcpt   = 2
		workers   = 32
		rounds    = 2000
	)
	s := limits.NewSlots(limits.SlotsConfig{Cap: capN, RetryShare: 0.3, PerRecipient: perRcpt})
	recipients := []string{"", "r0", "r1", "r2", "r3"}
	var inFlight, retries, peak, acquired atomic.Int64
	var byRcpt [5]atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				retry := (w+i)%3 == 0
				ri := (w + i) % len(recipients)
				err := s.TryAcquire(retry, recipients[ri])
				if errors.Is(err, limits.ErrNoCapacity) {
					// A lost wake-up would hang here until ctx ends.
					if err := s.Wait(ctx); err != nil {
						t.Errorf("Wait: %v", err)
						return
					}
					continue
				}
				if err != nil {
					continue
				}
				acquired.Add(1)
				n := inFlight.Add(1)
				for range 4 { // hold the slot a while so that the cap is reached
					runtime.Gosched()
				}
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if n > capN {
					t.Errorf("%d in flight, cap %d", n, capN)
				}
				if retry {
					if r := retries.Add(1); r > retryCapN {
						t.Errorf("%d retries in flight, share %d", r, retryCapN)
					}
				}
				if ri > 0 {
					if r := byRcpt[ri].Add(1); r > perRcpt {
						t.Errorf("%d in flight for %s, cap %d", r, recipients[ri], perRcpt)
					}
					byRcpt[ri].Add(-1)
				}
				if retry {
					retries.Add(-1)
				}
				inFlight.Add(-1)
				s.Release(retry, recipients[ri])
			}
		})
	}
	wg.Wait()
	if acquired.Load() == 0 || peak.Load() < 2 {
		t.Fatalf("%d acquisitions, peak %d in flight: the test did not run concurrently", acquired.Load(), peak.Load())
	}
	if got := s.InFlight(); got != 0 {
		t.Fatalf("InFlight after all released = %d, want 0", got)
	}
	t.Logf("%d acquisitions, peak %d in flight", acquired.Load(), peak.Load())
}

// TestSlotsReconfigureWhileInUse: a reload changes the cap, the retries' share and the
// per-recipient cap of slots in use; what is in flight keeps its slots and releases cleanly,
// whatever the per-recipient cap was when it was taken.
func TestSlotsReconfigureWhileInUse(t *testing.T) {
	s := limits.NewSlots(limits.SlotsConfig{Cap: 4, RetryShare: 0.5})
	for range 3 {
		if err := s.TryAcquire(false, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	s.Reconfigure(limits.SlotsConfig{Cap: 8, RetryShare: 0.25, PerRecipient: 2})
	if err := s.TryAcquire(false, "alice"); !errors.Is(err, limits.ErrRecipientBusy) {
		t.Errorf("alice, with 3 in flight and a new cap of 2: %v, want limits.ErrRecipientBusy", err)
	}
	if s.Cap() != 8 || s.RetryCap() != 2 || s.Free() != 5 {
		t.Errorf("cap %d, retry cap %d, free %d; want 8, 2, 5", s.Cap(), s.RetryCap(), s.Free())
	}
	for range 3 {
		s.Release(false, "alice") // taken under no cap, released under a cap: no panic
	}
	if err := s.TryAcquire(false, "alice"); err != nil {
		t.Errorf("alice with nothing in flight: %v", err)
	}
	s.Reconfigure(limits.SlotsConfig{Cap: 1})
	if s.Free() != 0 || s.RetryCap() != 1 {
		t.Errorf("after lowering the cap under what is in flight: free %d, retry cap %d", s.Free(), s.RetryCap())
	}
}

// TestSlotsTakeClaimPut: a lane takes the slots of a read before it reads, claims one for each
// entry it starts (where the retries' share and the recipient's cap apply) and puts back the
// rest; a refused claim leaves its slot taken for the caller to put back.
func TestSlotsTakeClaimPut(t *testing.T) {
	s := limits.NewSlots(limits.SlotsConfig{Cap: 4, RetryShare: 0.25, PerRecipient: 1})
	if got := s.Take(10); got != 4 {
		t.Fatalf("Take(10) of 4 free slots = %d, want 4", got)
	}
	if got := s.Take(1); got != 0 {
		t.Fatalf("Take(1) with none free = %d, want 0", got)
	}
	if err := s.Claim(true, "a"); err != nil {
		t.Fatalf("Claim(retry, a): %v", err)
	}
	if err := s.Claim(true, ""); !errors.Is(err, limits.ErrRetryShare) {
		t.Fatalf("a second retry's Claim = %v, want ErrRetryShare (the share is 1 slot)", err)
	}
	if err := s.Claim(false, "a"); !errors.Is(err, limits.ErrRecipientBusy) {
		t.Fatalf("a's second Claim = %v, want ErrRecipientBusy", err)
	}
	if err := s.Claim(false, "b"); err != nil {
		t.Fatalf("Claim(b): %v", err)
	}
	s.Put(2) // the two refused claims' slots
	if got := [2]int{s.Free(), s.InFlight()}; got != [2]int{2, 2} {
		t.Fatalf("after Put(2): Free, InFlight = %v, want [2 2]", got)
	}
	s.Release(true, "a")
	s.Release(false, "b")
	if got := s.Free(); got != 4 {
		t.Fatalf("after the releases: Free = %d, want 4", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Put of more than was taken did not panic")
		}
	}()
	s.Put(1)
}
