package dispatch

import (
	"sync"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// inHand are the entries this process has read and not yet ended, by stream. Every entry
// pending under this consumer's name in Redis is one of them, but for an entry read by a call
// whose reply never reached the process (Redis went away meanwhile): the reclaimer hands those
// back once they have idled past the visibility timeout, and spares these (a send may run
// longer than that). Safe for concurrent use.
type inHand struct {
	mu  sync.Mutex
	ids map[string]map[string]struct{} // guarded by mu; stream -> entry ids
}

func newInHand() *inHand { return &inHand{ids: map[string]map[string]struct{}{}} }

// add records e as in hand.
func (h *inHand) add(e stream.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.ids[e.Stream]
	if m == nil {
		m = map[string]struct{}{}
		h.ids[e.Stream] = m
	}
	m[e.ID] = struct{}{}
}

// done records e as ended (or left for another replica).
func (h *inHand) done(e stream.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ids[e.Stream], e.ID)
}

// of are the ids of the entries of stream in hand.
func (h *inHand) of(stream string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.ids[stream]))
	for id := range h.ids[stream] {
		out = append(out, id)
	}
	return out
}
