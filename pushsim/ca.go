package pushsim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// maxLeaves bounds the certificate cache: SNI names come from clients, so a client that sends
// a new name per connection must not grow memory without end.
const maxLeaves = 1024

// authority is pushsim's own certificate authority. It issues a leaf for whatever name a client
// asks for in SNI, so one listener can be fcm.googleapis.com, web.push.apple.com or any
// self-hosted push service, and the client verifies a real chain against CAFile.
//
// Certificates use the real clock, never Config.Now: the client checks them against its own
// wall clock, and a test that steps a fake clock must not make the chain expire.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	pool    *x509.CertPool
	leafKey *ecdsa.PrivateKey // one key for every leaf: a fresh key per name buys nothing here

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // guarded by mu; keyed by SNI name or IP
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pushsim: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pushsim test CA", Organization: []string{"webpush-gateway pushsim"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pushsim: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pushsim: CA certificate: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pushsim: leaf key: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pool:    pool,
		leafKey: leafKey,
		leaves:  make(map[string]*tls.Certificate),
	}, nil
}

// writePEM writes the CA certificate (never its key) for clients to trust.
func (a *authority) writePEM(path string) error {
	if err := os.WriteFile(path, a.certPEM, 0o644); err != nil {
		return fmt.Errorf("pushsim: write CA file: %w", err)
	}
	return nil
}

// getCertificate is tls.Config.GetCertificate: the leaf for the SNI name, or for the local IP
// when the client sent none (clients do not send SNI for IP literals).
func (a *authority) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.TrimSuffix(strings.ToLower(hello.ServerName), ".")
	if name == "" && hello.Conn != nil {
		if host, _, err := net.SplitHostPort(hello.Conn.LocalAddr().String()); err == nil {
			name = host
		}
	}
	if name == "" {
		name = "localhost"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[name]; ok {
		return c, nil
	}
	c, err := a.issue(name)
	if err != nil {
		return nil, err
	}
	if len(a.leaves) >= maxLeaves {
		clear(a.leaves)
	}
	a.leaves[name] = c
	return c, nil
}

func (a *authority) issue(name string) (*tls.Certificate, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("pushsim: leaf certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pushsim: leaf certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: a.leafKey, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+ panics instead).
		panic(err)
	}
	return n.Add(n, big.NewInt(1))
}
