package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// TestTransportErrorsAreRedacted: a transport error that quotes the endpoint, as a *url.Error
// does and as errors under it may (net/http quotes what a broken server sent back), leaves none
// of the endpoint's path in the outcome.
func TestTransportErrorsAreRedacted(t *testing.T) {
	const (
		token    = "dpH5lCsTSSM:APA91bHqjZxM0VImWWqDRN7U0a3AycjUf4O-byuxb_wJsKRaKvV"
		endpoint = "https://fcm.googleapis.com/fcm/send/" + token
	)
	a := &adapter{provider: &providers.Provider{ID: "fcm", Kind: "fcm"}}
	secrets := taxonomy.SecretsOf(endpoint)
	tests := []struct {
		name string
		err  error
	}{
		{"url.Error", &url.Error{Op: "Post", URL: endpoint, Err: io.ErrUnexpectedEOF}},
		{"url.Error quoting the path inside", &url.Error{Op: "Post", URL: endpoint,
			Err: fmt.Errorf("net/http: HTTP/1.x transport connection broken: malformed HTTP response %q", "POST /fcm/send/"+token+" HTTP/1.1")}},
		{"url.Error text without its type", errors.New((&url.Error{Op: "Post", URL: endpoint, Err: io.EOF}).Error())},
		{"the path percent-encoded", fmt.Errorf("no route to %s", url.PathEscape("/fcm/send/"+token))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := a.transportOutcome(context.Background(), secrets, tc.err)
			if out.Code != taxonomy.TransportError {
				t.Fatalf("code %s, want TRANSPORT_ERROR", out.Code)
			}
			for i := 0; i+8 <= len(token); i++ {
				if strings.Contains(out.Detail, token[i:i+8]) {
					t.Fatalf("detail %q holds %q of the token", out.Detail, token[i:i+8])
				}
			}
		})
	}
}
