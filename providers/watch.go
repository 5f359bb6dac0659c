package providers

import (
	"context"
	"crypto/sha256"
	"time"
)

// DefaultWatchEvery is how often a Watcher reads the file when Run is given no period.
const DefaultWatchEvery = time.Second

// A Watcher keeps a running worker's table in step with its registry file. It reads the file
// by path on every tick and compares the content, instead of asking the kernel for change
// events: a Kubernetes ConfigMap volume replaces the file by swapping a "..data" symlink in the
// directory, which per-file events miss and per-directory events report in several pieces,
// while a read through the path always sees the content a fresh process would load. Reading a
// file of a few KiB once a second costs nothing next to a worker's sends.
//
// A changed content is loaded only once it has read the same for Settle and on two ticks in a
// row (the debounce: an editor or a copy writes the file in more than one step, and a file cut
// short can still parse: a registry cut at "max_in_flight: 6" of 64 is a valid table), and a
// content is reported once, good or bad, so a broken edit is logged once and not every second.
// A writer that stops for longer than Settle in the middle of the file is not told from one that
// finished: a file written in place is safe only written at once, which is why the way to edit
// it is to write a new file beside it and rename it over (what a ConfigMap's update does).
// Kick loads at once, even unchanged content (SIGHUP is an operator asking).
type Watcher struct {
	// Settle is how long a changed content must read the same before it is loaded, measured
	// by Now (time.Now when nil); 0 leaves two reads in a row. NewWatcher sets DefaultSettle.
	Settle time.Duration
	Now    func() time.Time

	path         string
	applied      [sha256.Size]byte // content of the last load reported, good or bad
	failed       string            // the read error last reported, so an unreadable file is told once
	pending      *[sha256.Size]byte
	pendingSince time.Time // when pending was first read
}

// DefaultSettle is a Watcher's Settle: far longer than any local writer pauses between the
// writes of a small file, short enough that an edit is in force within a few seconds.
const DefaultSettle = time.Second

// NewWatcher returns a Watcher of the file at path. Call Load once for the starting table.
func NewWatcher(path string) *Watcher { return &Watcher{path: path, Settle: DefaultSettle} }

// Path is the file watched.
func (w *Watcher) Path() string { return w.path }

// Load reads and parses the file now, as Load does, and takes its content as the one applied.
func (w *Watcher) Load() (*Registry, error) {
	data, err := readFile(w.path)
	if err != nil {
		return nil, err
	}
	w.applied, w.failed, w.pending = sha256.Sum256(data), "", nil
	return Parse(w.path, data)
}

// Run reads the file every period (DefaultWatchEvery when period is not positive) until ctx
// ends, and calls changed with the new table, or with the errors that kept it from loading,
// whenever the settled content differs from the one last reported or kick fires. changed runs
// on Run's goroutine; while it runs, the file is not read. When changed returns retry (the
// table was good but could not be applied yet, Redis being away), the same content is offered
// again after it settles once more.
func (w *Watcher) Run(ctx context.Context, period time.Duration, kick <-chan struct{}, changed func(*Registry, error) (retry bool)) {
	if period <= 0 {
		period = DefaultWatchEvery
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			reg, err := w.Load()
			w.offered(changed(reg, err))
		case <-t.C:
			if reg, err, ok := w.poll(); ok {
				w.offered(changed(reg, err))
			}
		}
	}
}

// offered forgets the content just reported when it is to be offered again.
func (w *Watcher) offered(retry bool) {
	if retry {
		w.applied = [sha256.Size]byte{}
	}
}

// poll is one tick: ok says whether there is something to report.
func (w *Watcher) poll() (*Registry, error, bool) {
	data, err := readFile(w.path)
	if err != nil {
		// Whatever content appears next is loaded, even the one applied before: the caller
		// was told the file failed and must hear that it is good again.
		w.pending, w.applied = nil, [sha256.Size]byte{}
		if err.Error() == w.failed {
			return nil, nil, false
		}
		w.failed = err.Error()
		return nil, err, true
	}
	w.failed = ""
	sum := sha256.Sum256(data)
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	switch {
	case sum == w.applied:
		w.pending = nil
		return nil, nil, false
	case w.pending == nil || *w.pending != sum:
		w.pending, w.pendingSince = &sum, now()
		return nil, nil, false
	case now().Sub(w.pendingSince) < w.Settle:
		return nil, nil, false
	}
	w.applied, w.pending = sum, nil
	reg, err := Parse(w.path, data)
	return reg, err, true
}
