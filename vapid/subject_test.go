package vapid_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func TestValidateSubject(t *testing.T) {
	tests := []struct {
		name    string
		sub     string
		wantErr string // "" means valid; otherwise a substring naming the rule
	}{
		{name: "mailto", sub: "mailto:push@example.com"},
		{name: "mailto upper-case scheme", sub: "MAILTO:push@example.com"},
		{name: "mailto mixed-case scheme", sub: "Mailto:ops+push@mail.example.co.uk"},
		{name: "mailto punycode domain", sub: "mailto:ops@xn--bcher-kva.example"},
		{name: "mailto IDN domain", sub: "mailto:ops@bücher.de"},
		{name: "https host", sub: "https://example.com"},
		{name: "https path", sub: "https://example.com/contact"},
		{name: "https upper-case scheme port and query", sub: "HTTPS://Example.com:8443/contact?x=1"},

		{name: "empty", sub: "", wantErr: "empty"},
		{name: "mailto twice", sub: "mailto:mailto:x@example.com", wantErr: `"mailto:" appears twice`},
		{name: "mailto twice mixed case", sub: "mailto:MailTo:x@example.com", wantErr: `"mailto:" appears twice`},
		{name: "localhost", sub: "mailto:me@localhost", wantErr: `"localhost" is localhost`},
		{name: "subdomain of localhost", sub: "mailto:me@app.localhost", wantErr: "is localhost"},
		{name: ".local", sub: "mailto:a@b.local", wantErr: ".local (mDNS)"},
		{name: "space in local part", sub: "mailto:a b@example.com", wantErr: "whitespace"},
		{name: "leading space", sub: " mailto:a@example.com", wantErr: "whitespace"},
		{name: "trailing newline", sub: "mailto:a@example.com\n", wantErr: "whitespace"},
		{name: "https localhost", sub: "https://localhost", wantErr: `"localhost" is localhost`},
		{name: "https localhost with port", sub: "https://localhost:8080/contact", wantErr: "is localhost"},
		{name: "https .local", sub: "https://printer.local/", wantErr: ".local (mDNS)"},
		{name: "http", sub: "http://example.com", wantErr: "http: is not allowed"},
		{name: "bare address", sub: "push@example.com", wantErr: `did you mean "mailto:push@example.com"?`},
		{name: "bare domain", sub: "example.com", wantErr: "has no scheme"},
		{name: "other scheme", sub: "ftp://example.com", wantErr: `scheme "ftp" is not allowed`},
		{name: "mailto without address", sub: "mailto:", wantErr: "has no address"},
		{name: "empty local part", sub: "mailto:@example.com", wantErr: "empty local part"},
		{name: "two @", sub: "mailto:a@b@example.com", wantErr: "exactly one @ (found 2)"},
		{name: "no @", sub: "mailto:example.com", wantErr: "exactly one @ (found 0)"},
		{name: "domain without dot", sub: "mailto:a@example", wantErr: "has no dot"},
		{name: "domain ends with dot", sub: "mailto:a@example.com.", wantErr: "ends with a dot"},
		{name: "empty label", sub: "mailto:a@example..com", wantErr: "empty label"},
		{name: "label starting with hyphen", sub: "mailto:a@-x.example.com", wantErr: "starts or ends with '-'"},
		{name: "underscore in domain", sub: "mailto:a@my_host.example.com", wantErr: "not allowed in a domain name"},
		{name: "IP literal", sub: "mailto:a@[192.0.2.1]", wantErr: "is an IP address"},
		{name: "https IP", sub: "https://192.0.2.1/contact", wantErr: "is an IP address"},
		{name: "query in mailto", sub: "mailto:a@example.com?subject=hi", wantErr: "one plain address"},
		{name: "address list", sub: "mailto:a@example.com,b@example.com", wantErr: "one plain address"},
		{name: "display name", sub: "mailto:Ops<ops@example.com>", wantErr: "display name"},
		{name: "https without //", sub: "https:example.com", wantErr: "has no host"},
		{name: "https empty host", sub: "https:///contact", wantErr: "has no host"},
		{name: "https user info", sub: "https://user:pw@example.com/", wantErr: "user info"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vapid.ValidateSubject(tc.sub)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateSubject(%q) = %v, want nil", tc.sub, err)
				}
				return
			}
			if !errors.Is(err, vapid.ErrBadSubject) {
				t.Fatalf("ValidateSubject(%q) = %v, want %v", tc.sub, err, vapid.ErrBadSubject)
			}
			for _, part := range []string{tc.wantErr, "BadJwtToken"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
		})
	}
}

func TestAudience(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		want     string
		wantErr  bool
	}{
		{name: "fcm", endpoint: "https://fcm.googleapis.com/fcm/send/abc:def", want: "https://fcm.googleapis.com"},
		{name: "apple", endpoint: "https://web.push.apple.com/QGuQyavXutnMH", want: "https://web.push.apple.com"},
		{name: "wns query", endpoint: "https://wns2-par02p.notify.windows.com/w/?token=BQYAAA%2b", want: "https://wns2-par02p.notify.windows.com"},
		{name: "upper-case host and trailing dot", endpoint: "https://Updates.Push.Services.Mozilla.COM./wpush/v2/gAAA", want: "https://updates.push.services.mozilla.com"},
		{name: "upper-case scheme", endpoint: "HTTPS://push.example.net/x", want: "https://push.example.net"},
		{name: "default port dropped", endpoint: "https://push.example.net:443/x", want: "https://push.example.net"},
		{name: "other port kept", endpoint: "https://push.example.net:8443/x", want: "https://push.example.net:8443"},
		{name: "origin only", endpoint: "https://push.example.net", want: "https://push.example.net"},
		{name: "trailing slash", endpoint: "https://push.example.net/", want: "https://push.example.net"},
		{name: "IPv6 literal", endpoint: "https://[2001:DB8::1]:8443/x", want: "https://[2001:db8::1]:8443"},
		{name: "IPv6 literal canonicalised", endpoint: "https://[2001:DB8:0:0::1]/x", want: "https://[2001:db8::1]"},
		{name: "loopback (pushsim)", endpoint: "https://127.0.0.1:40123/push/x", want: "https://127.0.0.1:40123"},

		{name: "http", endpoint: "http://push.example.net/secret-token", wantErr: true},
		{name: "websocket", endpoint: "wss://push.example.net/secret-token", wantErr: true},
		{name: "no scheme", endpoint: "push.example.net/secret-token", wantErr: true},
		{name: "no host", endpoint: "https:///secret-token", wantErr: true},
		{name: "opaque", endpoint: "https:push.example.net/secret-token", wantErr: true},
		{name: "user info", endpoint: "https://user:secret-token@push.example.net/x", wantErr: true},
		{name: "port out of range", endpoint: "https://push.example.net:99999/secret-token", wantErr: true},
		{name: "bad escape", endpoint: "https://push.example.net/%zzsecret-token", wantErr: true},
		{name: "empty", endpoint: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vapid.Audience(tc.endpoint)
			if tc.wantErr {
				if !errors.Is(err, vapid.ErrBadAudience) {
					t.Fatalf("Audience = %q, %v; want %v", got, err, vapid.ErrBadAudience)
				}
				if strings.Contains(err.Error(), "secret-token") {
					t.Errorf("error %q leaks the endpoint path or user info", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Audience: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Audience (-want +got):\n%s", diff)
			}
			// An origin is its own audience.
			again, err := vapid.Audience(got)
			if err != nil || again != got {
				t.Errorf("Audience(%q) = %q, %v; want it unchanged", got, again, err)
			}
		})
	}
}
