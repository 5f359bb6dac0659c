package pushsim_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// BenchmarkAccept is one accepted push end to end: TLS + HTTP/2 from parallel clients, JWT
// checks, decryption, recording and the 201. The body and JWT are made once, so the figure is
// pushsim's own cost plus the Go client's, not the sender's encryption or signing. Client and
// server share the machine: on few cores the client's half is a large share.
func BenchmarkAccept(b *testing.B) {
	for _, tc := range []struct {
		name  string
		http1 bool
	}{{"h2", false}, {"http1.1", true}} {
		b.Run(tc.name, func(b *testing.B) {
			s := start(b, pushsim.Config{MaxDeliveries: 4096})
			c := client(b, s, clientOptions{http1: tc.http1})
			app := newAppServer(b)
			sub := subscribe(b, s, "autopush", "", app)
			body := encrypt(b, sub, bytes.Repeat([]byte("p"), 512))
			auth := app.authorization(b, sub.Endpoint)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, sub.Endpoint, bytes.NewReader(body))
					req.Header.Set("TTL", "60")
					req.Header.Set("Content-Encoding", "aes128gcm")
					req.Header.Set("Authorization", auth)
					resp, err := c.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
