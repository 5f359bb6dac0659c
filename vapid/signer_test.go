package vapid_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

const (
	testSub = "mailto:push@example.com"
	audA    = "https://push.example.net"
	audB    = "https://fcm.googleapis.com"
)

func newTestSigner(t testing.TB, opts vapid.SignerOptions) *vapid.Signer {
	t.Helper()
	if opts.Subject == "" {
		opts.Subject = testSub
	}
	s, err := vapid.NewSigner(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestKey(t testing.TB, name string) *vapid.Key {
	t.Helper()
	k, err := vapid.GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestHeaderToken: the header is "vapid t=<jwt>, k=<our public key>" and the
// JWT verifies with k and carries exactly aud, exp and sub.
func TestHeaderToken(t *testing.T) {
	key := newTestKey(t, "main")
	tests := []struct {
		name     string
		subject  string
		aud      string
		lifetime time.Duration
		wantSub  string
		wantExp  time.Time
	}{
		{name: "default lifetime", subject: testSub, aud: audA, wantSub: testSub, wantExp: t0.Add(12 * time.Hour)},
		{name: "upper-case scheme is normalised", subject: "MAILTO:push@example.com", aud: audA, wantSub: testSub, wantExp: t0.Add(12 * time.Hour)},
		{name: "https subject and port", subject: "https://example.com/contact", aud: "https://push.example.net:8443", wantSub: "https://example.com/contact", wantExp: t0.Add(12 * time.Hour)},
		{name: "explicit lifetime", subject: testSub, aud: audB, lifetime: time.Hour, wantSub: testSub, wantExp: t0.Add(time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSigner(t, vapid.SignerOptions{Subject: tc.subject, Now: func() time.Time { return t0 }})
			h, err := s.Header(key, tc.aud, tc.lifetime)
			if err != nil {
				t.Fatal(err)
			}
			token, k := splitHeader(t, h)
			if diff := cmp.Diff(key.PublicKey(), k); diff != "" {
				t.Errorf("k (-want +got):\n%s", diff)
			}
			header, claims, err := verifyToken(t, token, k, t0)
			if err != nil {
				t.Fatalf("token does not verify: %v", err)
			}
			if diff := cmp.Diff(`{"typ":"JWT","alg":"ES256"}`, header); diff != "" {
				t.Errorf("JOSE header (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantClaims(tc.aud, tc.wantExp, tc.wantSub), claims); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
			// The same token must not verify with another key.
			if _, _, err := verifyToken(t, token, newTestKey(t, "other").PublicKey(), t0); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
				t.Errorf("verify with another key: err = %v, want %v", err, jwt.ErrTokenSignatureInvalid)
			}
		})
	}
}

// TestExpWindow: exp is now+lifetime rounded down to a second, never more
// than MaxLifetime ahead, and the token is valid until exp, not after.
func TestExpWindow(t *testing.T) {
	key := newTestKey(t, "main")
	now := t0.Add(700 * time.Millisecond) // not a whole second: exp rounds down
	tests := []struct {
		name           string
		signerLifetime time.Duration
		lifetime       time.Duration
		wantExp        time.Time
	}{
		{name: "default", wantExp: t0.Add(12 * time.Hour)},
		{name: "signer default 6h", signerLifetime: 6 * time.Hour, wantExp: t0.Add(6 * time.Hour)},
		{name: "per call 1h overrides signer", signerLifetime: 6 * time.Hour, lifetime: time.Hour, wantExp: t0.Add(time.Hour)},
		{name: "maximum 24h", lifetime: vapid.MaxLifetime, wantExp: t0.Add(24 * time.Hour)},
		{name: "90s", lifetime: 90 * time.Second, wantExp: t0.Add(90 * time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSigner(t, vapid.SignerOptions{Lifetime: tc.signerLifetime, Now: func() time.Time { return now }})
			h, err := s.Header(key, audA, tc.lifetime)
			if err != nil {
				t.Fatal(err)
			}
			token, k := splitHeader(t, h)
			_, claims, err := verifyToken(t, token, k, now)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := claims.GetExpirationTime()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantExp, exp.UTC()); diff != "" {
				t.Errorf("exp (-want +got):\n%s", diff)
			}
			if exp.Sub(now) > vapid.MaxLifetime {
				t.Errorf("exp is %v ahead, over %v", exp.Sub(now), vapid.MaxLifetime)
			}
			if _, _, err := verifyToken(t, token, k, exp.Add(-time.Second)); err != nil {
				t.Errorf("one second before exp: %v", err)
			}
			if _, _, err := verifyToken(t, token, k, exp.Time); !errors.Is(err, jwt.ErrTokenExpired) {
				t.Errorf("at exp: err = %v, want %v", err, jwt.ErrTokenExpired)
			}
		})
	}
}

func TestSignerErrors(t *testing.T) {
	key := newTestKey(t, "main")
	s := newTestSigner(t, vapid.SignerOptions{Now: func() time.Time { return t0 }})
	tests := []struct {
		name    string
		run     func() error
		want    error
		wantMsg string
	}{
		{name: "bad subject", want: vapid.ErrBadSubject, wantMsg: "is localhost", run: func() error {
			_, err := vapid.NewSigner(vapid.SignerOptions{Subject: "mailto:me@localhost"})
			return err
		}},
		{name: "negative signer lifetime", want: vapid.ErrBadLifetime, run: func() error {
			_, err := vapid.NewSigner(vapid.SignerOptions{Subject: testSub, Lifetime: -time.Second})
			return err
		}},
		{name: "signer lifetime over 24h", want: vapid.ErrBadLifetime, run: func() error {
			_, err := vapid.NewSigner(vapid.SignerOptions{Subject: testSub, Lifetime: vapid.MaxLifetime + time.Second})
			return err
		}},
		{name: "negative lifetime", want: vapid.ErrBadLifetime, run: func() error {
			_, err := s.Header(key, audA, -time.Minute)
			return err
		}},
		{name: "lifetime over 24h", want: vapid.ErrBadLifetime, run: func() error {
			_, err := s.Header(key, audA, 25*time.Hour)
			return err
		}},
		{name: "nil key", want: vapid.ErrBadKey, run: func() error {
			_, err := s.Header(nil, audA, 0)
			return err
		}},
		{name: "zero key", want: vapid.ErrBadKey, run: func() error {
			_, err := s.Header(&vapid.Key{}, audA, 0)
			return err
		}},
		{name: "whole endpoint instead of origin", want: vapid.ErrBadAudience, wantMsg: `"https://push.example.net"`, run: func() error {
			_, err := s.Header(key, "https://push.example.net/wpush/v2/secret-token", 0)
			return err
		}},
		{name: "origin with trailing slash", want: vapid.ErrBadAudience, run: func() error {
			_, err := s.Header(key, "https://push.example.net/", 0)
			return err
		}},
		{name: "upper-case origin", want: vapid.ErrBadAudience, run: func() error {
			_, err := s.Header(key, "https://Push.Example.net", 0)
			return err
		}},
		{name: "http audience", want: vapid.ErrBadAudience, run: func() error {
			_, err := s.Header(key, "http://push.example.net", 0)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %q, want it to contain %q", err, tc.wantMsg)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("err = %q leaks the endpoint path", err)
			}
		})
	}
	if got := s.Signatures(); got != 0 {
		t.Errorf("Signatures after only errors = %d, want 0", got)
	}
}

// TestCacheRefresh steps a fake clock through two token lifetimes: one
// signature per lifetime, re-signed exactly when now reaches exp-15m.
func TestCacheRefresh(t *testing.T) {
	key := newTestKey(t, "main")
	clock := timetest.NewClock(t0)
	s := newTestSigner(t, vapid.SignerOptions{Now: clock.Now})
	const L = vapid.DefaultLifetime
	refresh1 := L - vapid.RefreshBefore            // 11h45m after t0
	refresh2 := refresh1 + L - vapid.RefreshBefore // 23h30m after t0
	steps := []struct {
		name     string
		at       time.Duration // after t0
		wantSigs uint64
		wantExp  time.Duration // after t0
	}{
		{name: "first call signs", at: 0, wantSigs: 1, wantExp: L},
		{name: "same instant is cached", at: 0, wantSigs: 1, wantExp: L},
		{name: "an hour later is cached", at: time.Hour, wantSigs: 1, wantExp: L},
		{name: "just before exp-15m is cached", at: refresh1 - time.Nanosecond, wantSigs: 1, wantExp: L},
		{name: "at exp-15m re-signs", at: refresh1, wantSigs: 2, wantExp: refresh1 + L},
		{name: "new token is cached", at: refresh1 + time.Minute, wantSigs: 2, wantExp: refresh1 + L},
		{name: "just before second refresh is cached", at: refresh2 - time.Nanosecond, wantSigs: 2, wantExp: refresh1 + L},
		{name: "second refresh re-signs", at: refresh2, wantSigs: 3, wantExp: refresh2 + L},
		{name: "far past exp re-signs", at: 10 * L, wantSigs: 4, wantExp: 11 * L},
	}
	prev, prevSigs := "", uint64(0)
	for _, st := range steps {
		clock.Set(t0.Add(st.at))
		h, err := s.Header(key, audA, 0)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.wantSigs, s.Signatures()); diff != "" {
			t.Errorf("%s: Signatures (-want +got):\n%s", st.name, diff)
		}
		token, k := splitHeader(t, h)
		_, claims, err := verifyToken(t, token, k, t0.Add(st.at))
		if err != nil {
			t.Fatalf("%s: cached token does not verify at its use time: %v", st.name, err)
		}
		if diff := cmp.Diff(wantClaims(audA, t0.Add(st.wantExp), testSub), claims); diff != "" {
			t.Errorf("%s: claims (-want +got):\n%s", st.name, diff)
		}
		if exp, _ := claims.GetExpirationTime(); exp.Sub(t0.Add(st.at)) < vapid.RefreshBefore {
			t.Errorf("%s: token sent %v before its exp, want at least %v", st.name, exp.Sub(t0.Add(st.at)), vapid.RefreshBefore)
		}
		if reused := st.wantSigs == prevSigs; reused != (h == prev) {
			t.Errorf("%s: header reused = %v, want %v", st.name, h == prev, reused)
		}
		prev, prevSigs = h, st.wantSigs
	}
}

// TestCacheLifetimeRules: a caller asking for a shorter lifetime than the
// cached token's, or a clock stepped back, gets a new token; short lifetimes
// refresh a quarter before exp rather than 15 minutes, so they still cache.
func TestCacheLifetimeRules(t *testing.T) {
	key := newTestKey(t, "main")
	type call struct {
		at       time.Duration
		lifetime time.Duration
		wantSigs uint64
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{name: "shorter lifetime re-signs, longer reuses", calls: []call{
			{at: 0, lifetime: 12 * time.Hour, wantSigs: 1},
			{at: time.Minute, lifetime: time.Hour, wantSigs: 2},
			{at: 2 * time.Minute, lifetime: 12 * time.Hour, wantSigs: 2},
			{at: 3 * time.Minute, lifetime: time.Hour, wantSigs: 2},
		}},
		{name: "clock stepped back re-signs", calls: []call{
			{at: 0, wantSigs: 1},
			{at: -time.Hour, wantSigs: 2},
			{at: -time.Hour + time.Minute, wantSigs: 2},
		}},
		{name: "20m lifetime refreshes 5m before exp", calls: []call{
			{at: 0, lifetime: 20 * time.Minute, wantSigs: 1},
			{at: 15*time.Minute - time.Nanosecond, lifetime: 20 * time.Minute, wantSigs: 1},
			{at: 15 * time.Minute, lifetime: 20 * time.Minute, wantSigs: 2},
		}},
		{name: "1h lifetime refreshes 15m before exp", calls: []call{
			{at: 0, lifetime: time.Hour, wantSigs: 1},
			{at: 45*time.Minute - time.Nanosecond, lifetime: time.Hour, wantSigs: 1},
			{at: 45 * time.Minute, lifetime: time.Hour, wantSigs: 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := timetest.NewClock(t0)
			s := newTestSigner(t, vapid.SignerOptions{Now: clock.Now})
			for i, c := range tc.calls {
				clock.Set(t0.Add(c.at))
				if _, err := s.Header(key, audA, c.lifetime); err != nil {
					t.Fatal(err)
				}
				if got := s.Signatures(); got != c.wantSigs {
					t.Errorf("call %d (at %v, lifetime %v): Signatures = %d, want %d", i, c.at, c.lifetime, got, c.wantSigs)
				}
			}
		})
	}
}

// TestCacheKeys: one signature per (key name + public key, audience).
func TestCacheKeys(t *testing.T) {
	k1 := newTestKey(t, "k1")
	k2 := newTestKey(t, "k2")
	pemBytes, err := k1.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	k1Renamed, err := vapid.ParseKey("k1-renamed", pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	k1Copy, err := vapid.ParseKey("k1", pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	type use struct {
		key *vapid.Key
		aud string
	}
	tests := []struct {
		name     string
		uses     []use
		wantSigs uint64
	}{
		{name: "two audiences sign twice", uses: []use{{k1, audA}, {k1, audB}, {k1, audA}, {k1, audB}}, wantSigs: 2},
		{name: "two keys sign twice", uses: []use{{k1, audA}, {k2, audA}, {k1, audA}, {k2, audA}}, wantSigs: 2},
		{name: "same key under another name signs again", uses: []use{{k1, audA}, {k1Renamed, audA}}, wantSigs: 2},
		{name: "same name and key parsed twice shares the entry", uses: []use{{k1, audA}, {k1Copy, audA}}, wantSigs: 1},
		{name: "two keys times two audiences", uses: []use{{k1, audA}, {k1, audB}, {k2, audA}, {k2, audB}, {k2, audB}}, wantSigs: 4},
	}
	byKey := map[string]map[string]uint64{
		"two audiences sign twice":                        {"k1": 2},
		"two keys sign twice":                             {"k1": 1, "k2": 1},
		"same key under another name signs again":         {"k1": 1, "k1-renamed": 1},
		"same name and key parsed twice shares the entry": {"k1": 1},
		"two keys times two audiences":                    {"k1": 2, "k2": 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSigner(t, vapid.SignerOptions{Now: func() time.Time { return t0 }})
			for _, u := range tc.uses {
				h, err := s.Header(u.key, u.aud, 0)
				if err != nil {
					t.Fatal(err)
				}
				token, k := splitHeader(t, h)
				if k != u.key.PublicKey() {
					t.Fatalf("header for %s carries another key", u.key.Name())
				}
				if _, claims, err := verifyToken(t, token, k, t0); err != nil || claims["aud"] != u.aud {
					t.Fatalf("token for %s/%s: aud %v, err %v", u.key.Name(), u.aud, claims["aud"], err)
				}
			}
			if got := s.Signatures(); got != tc.wantSigs {
				t.Errorf("Signatures = %d, want %d", got, tc.wantSigs)
			}
			if d := cmp.Diff(byKey[tc.name], s.SignaturesByKey()); d != "" {
				t.Errorf("SignaturesByKey (-want +got):\n%s", d)
			}
		})
	}
}

// barrierNow returns a clock whose first n calls block until all n have
// arrived, so n goroutines calling Header leave Now (its first step) at the
// same moment and miss the cache together.
func barrierNow(n int32) func() time.Time {
	var arrived atomic.Int32
	release := make(chan struct{})
	return func() time.Time {
		if c := arrived.Add(1); c <= n {
			if c == n {
				close(release)
			}
			<-release
		}
		return t0
	}
}

// TestConcurrentMisses: goroutines that miss one (key, audience) together
// cause exactly one signature and all get the same header.
func TestConcurrentMisses(t *testing.T) {
	tests := []struct {
		name      string
		audiences []string
		perAud    int
	}{
		{name: "200 goroutines one audience", audiences: []string{audA}, perAud: 200},
		{name: "4 audiences 50 goroutines each", audiences: []string{audA, audB, "https://web.push.apple.com", "https://updates.push.services.mozilla.com"}, perAud: 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := newTestKey(t, "main")
			n := len(tc.audiences) * tc.perAud
			s := newTestSigner(t, vapid.SignerOptions{Now: barrierNow(int32(n))})
			headers := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					headers[i], errs[i] = s.Header(key, tc.audiences[i%len(tc.audiences)], 0)
				})
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("goroutine %d: %v", i, errs[i])
				}
				if first := headers[i%len(tc.audiences)]; headers[i] != first {
					t.Fatalf("goroutine %d got a different header than goroutine %d", i, i%len(tc.audiences))
				}
			}
			if got, want := s.Signatures(), uint64(len(tc.audiences)); got != want {
				t.Errorf("Signatures = %d, want %d", got, want)
			}
		})
	}
}
