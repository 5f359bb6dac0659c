package providers_test

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// testRegistry is the shipped table plus a self-hosted entry whose host is a suffix of nothing
// else and a nested entry, to test longest-suffix matching.
func testRegistry(t testing.TB) *providers.Registry {
	t.Helper()
	reg, err := providers.Parse("test.yaml", doc(
		"version: 1",
		"providers:",
		"  - id: fcm",
		"    hosts: [fcm.googleapis.com, android.googleapis.com]",
		"  - id: autopush",
		"    hosts: [updates.push.services.mozilla.com, push.services.mozilla.com]",
		"  - id: apple",
		"    hosts: [web.push.apple.com]",
		"  - id: wns",
		"    hosts: [notify.windows.com]",
		"  - id: acme",
		"    kind: autopush",
		"    hosts: [acme.example]",
		"  - id: acme-eu",
		"    kind: autopush",
		"    hosts: [eu.push.acme.example]",
		"  - id: fallback",
	))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return reg
}

// resolveWant is what TestResolve checks of a Route.
type resolveWant struct {
	Provider  string
	Authority string
	Unknown   bool
}

// resolveCases are the endpoints Resolve routes or refuses, with what it must say of each.
var resolveCases = []struct {
	name     string
	endpoint string
	want     resolveWant
	err      error
}{
	{"fcm", "https://fcm.googleapis.com/fcm/send/abc:APA91b", resolveWant{"fcm", "fcm.googleapis.com", false}, nil},
	{"legacy gcm host", "https://android.googleapis.com/gcm/send/abc", resolveWant{"fcm", "android.googleapis.com", false}, nil},
	{"autopush v2", "https://updates.push.services.mozilla.com/wpush/v2/gAAAA", resolveWant{"autopush", "updates.push.services.mozilla.com", false}, nil},
	{"apple", "https://web.push.apple.com/QGx2", resolveWant{"apple", "web.push.apple.com", false}, nil},
	{"wns data-centre host", "https://wns2-par02p.notify.windows.com/w/?token=BQYAAA%2b%2f", resolveWant{"wns", "wns2-par02p.notify.windows.com", false}, nil},
	{"upper case host and scheme", "HTTPS://FCM.GoogleAPIs.COM/fcm/send/x", resolveWant{"fcm", "fcm.googleapis.com", false}, nil},
	{"trailing dot", "https://fcm.googleapis.com./fcm/send/x", resolveWant{"fcm", "fcm.googleapis.com", false}, nil},
	{"port kept", "https://fcm.googleapis.com:8443/x", resolveWant{"fcm", "fcm.googleapis.com:8443", false}, nil},
	{"default port dropped", "https://fcm.googleapis.com:443/x", resolveWant{"fcm", "fcm.googleapis.com", false}, nil},
	{"trailing dot and port", "https://Web.Push.Apple.Com.:0443/x", resolveWant{"apple", "web.push.apple.com", false}, nil},
	{"subdomain", "https://a.fcm.googleapis.com/x", resolveWant{"fcm", "a.fcm.googleapis.com", false}, nil},
	{"label boundary", "https://evilgoogleapis.com/fcm/send/x", resolveWant{"fallback", "evilgoogleapis.com", true}, nil},
	{"label boundary inside", "https://xfcm.googleapis.com/x", resolveWant{"fallback", "xfcm.googleapis.com", true}, nil},
	{"parent of a listed host", "https://googleapis.com/x", resolveWant{"fallback", "googleapis.com", true}, nil},
	{"longest suffix wins", "https://a.eu.push.acme.example/x", resolveWant{"acme-eu", "a.eu.push.acme.example", false}, nil},
	{"shorter suffix", "https://us.push.acme.example/x", resolveWant{"acme", "us.push.acme.example", false}, nil},
	{"unknown host", "https://push.example.org/x", resolveWant{"fallback", "push.example.org", true}, nil},
	{"single label host", "https://pushserver/x", resolveWant{"fallback", "pushserver", true}, nil},
	{"underscore host", "https://push_1.example.org/x", resolveWant{"fallback", "push_1.example.org", true}, nil},
	{"IPv4 literal", "https://10.0.0.1/x", resolveWant{"fallback", "10.0.0.1", true}, nil},
	{"IPv6 literal with port", "https://[::1]:8443/x", resolveWant{"fallback", "[::1]:8443", true}, nil},
	{"IPv6 literal canonicalised", "https://[2001:DB8:0::1]/x", resolveWant{"fallback", "[2001:db8::1]", true}, nil},
	{"empty port", "https://fcm.googleapis.com:/x", resolveWant{"fcm", "fcm.googleapis.com", false}, nil},

	{"http", "http://fcm.googleapis.com/fcm/send/x", resolveWant{}, providers.ErrNotHTTPS},
	{"wss", "wss://fcm.googleapis.com/x", resolveWant{}, providers.ErrNotHTTPS},
	{"no scheme", "fcm.googleapis.com/fcm/send/x", resolveWant{}, providers.ErrBadEndpoint},
	{"garbage", "not a url at all", resolveWant{}, providers.ErrBadEndpoint},
	{"control character", "https://fcm.googleapis.com/\x00", resolveWant{}, providers.ErrBadEndpoint},
	{"empty", "", resolveWant{}, providers.ErrBadEndpoint},
	{"no host", "https:///fcm/send/x", resolveWant{}, providers.ErrBadEndpoint},
	{"opaque", "https:fcm.googleapis.com", resolveWant{}, providers.ErrBadEndpoint},
	{"userinfo", "https://user:pass@fcm.googleapis.com/x", resolveWant{}, providers.ErrBadEndpoint},
	{"userinfo without password", "https://user@fcm.googleapis.com/x", resolveWant{}, providers.ErrBadEndpoint},
	{"port zero", "https://fcm.googleapis.com:0/x", resolveWant{}, providers.ErrBadEndpoint},
	{"port too big", "https://fcm.googleapis.com:65536/x", resolveWant{}, providers.ErrBadEndpoint},
	{"two trailing dots", "https://fcm.googleapis.com../x", resolveWant{}, providers.ErrBadEndpoint},
	{"bad label", "https://-fcm.googleapis.com/x", resolveWant{}, providers.ErrBadEndpoint},
	{"non-ASCII host", "https://bücher.example/x", resolveWant{}, providers.ErrBadEndpoint},
	{"IPv6 zone", "https://[fe80::1%25eth0]/x", resolveWant{}, providers.ErrBadEndpoint},
	{"too long", "https://fcm.googleapis.com/" + strings.Repeat("a", providers.MaxEndpointLen), resolveWant{}, providers.ErrBadEndpoint},
}

func TestResolve(t *testing.T) {
	type want = resolveWant
	for _, tc := range resolveCases {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			rt, err := reg.Resolve(tc.endpoint)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Resolve error = %v, want %v", err, tc.err)
				}
				if len(tc.endpoint) > 20 && strings.Contains(err.Error(), tc.endpoint[len(tc.endpoint)-8:]) {
					t.Errorf("error %q quotes the endpoint", err)
				}
				if n := reg.UnknownAuthorities(); n != 0 {
					t.Errorf("UnknownAuthorities() = %d after a refused endpoint, want 0", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			got := want{rt.Provider.ID, rt.Authority, rt.Unknown}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("route (-want +got):\n%s", diff)
			}
			wantCount := uint64(0)
			if tc.want.Unknown {
				wantCount = 1
			}
			if n := reg.UnknownAuthorities(); n != wantCount {
				t.Errorf("UnknownAuthorities() = %d, want %d", n, wantCount)
			}
			if rt.Endpoint != tc.endpoint {
				t.Errorf("Endpoint = %q, want the input unchanged", rt.Endpoint)
			}
		})
	}
}

// TestResolveParsed: given the parse of the endpoint, ResolveParsed routes or refuses it as
// Resolve does, word for word, and its Route carries that very URL, unchanged.
func TestResolveParsed(t *testing.T) {
	for _, tc := range resolveCases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.endpoint)
			if err != nil {
				t.Skip("url.Parse refuses it: no caller has a parse to give")
			}
			before := *u
			reg, parsedReg := testRegistry(t), testRegistry(t)
			want, wantErr := reg.Resolve(tc.endpoint)
			got, err := parsedReg.ResolveParsed(tc.endpoint, u)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("ResolveParsed error = %v, Resolve's = %v", err, wantErr)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("ResolveParsed error = %v, want %v", err, tc.err)
			}
			if n, wantN := parsedReg.UnknownAuthorities(), reg.UnknownAuthorities(); n != wantN {
				t.Errorf("UnknownAuthorities() = %d, Resolve's %d", n, wantN)
			}
			if *u != before {
				t.Errorf("ResolveParsed changed the URL it was given: %#v, was %#v", *u, before)
			}
			if err != nil {
				return
			}
			if got.URL != u {
				t.Errorf("Route.URL is not the URL given")
			}
			if !reflect.DeepEqual(got.URL, want.URL) || got.Provider.ID != want.Provider.ID || got.Authority != want.Authority ||
				got.Unknown != want.Unknown || got.Endpoint != want.Endpoint {
				t.Errorf("ResolveParsed = %+v, Resolve = %+v", got, want)
			}
		})
	}
}

// WNS needs the channel URI byte for byte: Resolve must hand back the URL exactly as parsed,
// with its escaping intact.
func TestResolveKeepsURLBytes(t *testing.T) {
	reg := testRegistry(t)
	for _, ep := range []string{
		"https://wns2-par02p.notify.windows.com/w/?token=BQYAAAC%2bHa2kX%2f%3d%3d&x=a+b",
		"https://FCM.googleapis.com./fcm/send/dGVzdA:APA91b%2Fx%3A",
		"https://updates.push.services.mozilla.com/wpush/v2/gAAAAABk%2F%2Bx",
	} {
		rt, err := reg.Resolve(ep)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", ep, err)
		}
		if got := rt.URL.String(); got != ep {
			t.Errorf("URL.String() = %q, want %q", got, ep)
		}
		if got, want := rt.URL.RequestURI(), ep[strings.Index(ep[8:], "/")+8:]; got != want {
			t.Errorf("RequestURI() = %q, want %q", got, want)
		}
	}
}

func TestResolveCountsConcurrently(t *testing.T) {
	reg := testRegistry(t)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := reg.Resolve("https://push.example.org/x"); err != nil {
					t.Error(err)
					return
				}
				if _, err := reg.Resolve("https://fcm.googleapis.com/x"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := reg.UnknownAuthorities(); got != workers*each {
		t.Errorf("UnknownAuthorities() = %d, want %d", got, workers*each)
	}
}

func BenchmarkResolve(b *testing.B) {
	reg := testRegistry(b)
	for _, bc := range []struct{ name, endpoint string }{
		{"fcm", "https://fcm.googleapis.com/fcm/send/dGVzdA:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"},
		{"wns", "https://wns2-par02p.notify.windows.com/w/?token=BQYAAAC%2bHa2kX0b6eW9SnhIw%2f%3d%3d"},
		{"unknown", "https://push.selfhosted.example.org/wpush/v2/gAAAAABk"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Resolve(bc.endpoint); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The routing of a job decode has already parsed (job.Parsed): what each stage after
		// the decode pays.
		b.Run(bc.name+"-parsed", func(b *testing.B) {
			u, err := url.Parse(bc.endpoint)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.ResolveParsed(bc.endpoint, u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
