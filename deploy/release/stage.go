package release

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// stage is a registry on loopback that answers as the release's registry host (ghcr.io), so
// that cosign signs and attests the images under the names they are published with, and
// nothing leaves the machine. cosign reaches it through an HTTP CONNECT proxy (HTTPS_PROXY)
// that tunnels a CONNECT to host:443, and nothing else, to the registry's TLS listener, whose
// certificate for host comes from a CA made for the run (SSL_CERT_FILE).
type stage struct {
	host    string
	reg     *httptest.Server
	proxy   net.Listener
	caFile  string
	pool    *x509.CertPool
	wg      sync.WaitGroup
	mu      sync.Mutex
	refused []string
}

// newStage starts the registry and the proxy; dir receives the CA certificate.
func newStage(host, dir string) (*stage, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webpush-gateway release stage CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	s := &stage{host: host, pool: x509.NewCertPool()}
	s.pool.AddCert(ca)
	s.caFile = filepath.Join(dir, "stage-ca.pem")
	if err := os.WriteFile(s.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	s.reg = httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	s.reg.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}
	s.reg.StartTLS()
	if s.proxy, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		s.reg.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.serveProxy()
	return s, nil
}

// ProxyURL is the proxy, for HTTPS_PROXY.
func (s *stage) ProxyURL() string { return "http://" + s.proxy.Addr().String() }

// proxyVars are the variables that steer a process's HTTP proxy and trusted CAs; a process
// that reaches the stage has them unset but for Env's.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// Env is what a child process needs to reach the stage as host: the proxy and the CA.
func (s *stage) Env() []string {
	return []string{"HTTPS_PROXY=" + s.ProxyURL(), "SSL_CERT_FILE=" + s.caFile}
}

// Transport is an http.RoundTripper of this process that reaches the stage as host.
func (s *stage) Transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = func(*http.Request) (*url.URL, error) { return url.Parse(s.ProxyURL()) }
	t.TLSClientConfig = &tls.Config{RootCAs: s.pool}
	return t
}

// Refused lists the CONNECT targets the proxy refused (anything but host:443).
func (s *stage) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

func (s *stage) serveProxy() {
	defer s.wg.Done()
	for {
		c, err := s.proxy.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.tunnel(c)
		}()
	}
}

// tunnel answers one proxy connection: a CONNECT to host:443 is joined to the registry.
func (s *stage) tunnel(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect || req.Host != s.host+":443" {
		s.mu.Lock()
		s.refused = append(s.refused, req.Method+" "+req.Host)
		s.mu.Unlock()
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", s.reg.Listener.Addr().String())
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	// Either side's end ends the tunnel: closing both stops the other copy.
	<-done
	c.Close()
	up.Close()
	<-done
}

// Close stops the proxy and the registry and waits for their connections to end.
func (s *stage) Close() error {
	err := s.proxy.Close()
	s.reg.CloseClientConnections()
	s.reg.Close()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// String names the stage in errors.
func (s *stage) String() string {
	return fmt.Sprintf("stage registry %s at %s", s.host, s.reg.Listener.Addr())
}
