package pushsim

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// This file verifies VAPID (RFC 8292) with its own few lines of JWT code on purpose: pushsim
// must not share a parser or a signer with the gateway, or a bug in one would pass in both.

// Claims are the VAPID JWT claims a push service reads.
type Claims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// maxExpAhead is how far ahead exp may be: FCM, Apple and Autopush all refuse more than a day.
const maxExpAhead = 24 * time.Hour

// noReason marks a check that passed.
const noReason reason = -1

// checkVAPID checks the Authorization header of a push to sub at authority, the way the
// services do: the vapid scheme with t and k, an ES256 signature by k, k the key the subscription
// was made with, aud the origin, exp within a day, and on Apple's host a real sub.
func (s *Server) checkVAPID(h http.Header, sub *subscription, provider, authority string, now time.Time, checkSig bool) (Claims, reason) {
	v := strings.TrimSpace(h.Get("Authorization"))
	if v == "" {
		return Claims{}, reasonAuthMissing
	}
	// Draft VAPID put the key in Crypto-Key: p256ecdsa=...; RFC 8292 moved it into k.
	for _, ck := range h.Values("Crypto-Key") {
		if strings.Contains(strings.ToLower(ck), "p256ecdsa=") {
			return Claims{}, reasonAuthMalformed
		}
	}
	token, k, ok := parseVapidHeader(v)
	if !ok {
		return Claims{}, reasonAuthMalformed
	}
	raw, pub, err := decodeKey(k)
	if err != nil {
		return Claims{}, reasonBadKey
	}
	claims, ok := s.verified.verify(token, raw, pub, checkSig)
	if !ok {
		return Claims{}, reasonBadJWT
	}
	if !bytes.Equal(raw, sub.appKey) {
		return claims, reasonKeyMismatch
	}
	if claims.Aud != origin(authority) {
		return claims, reasonAud
	}
	if claims.Exp <= now.Unix() {
		return claims, reasonExpired
	}
	if claims.Exp > now.Add(maxExpAhead).Unix() {
		return claims, reasonExpTooFar
	}
	if provider == Apple && !appleSubject(claims.Sub) {
		return claims, reasonBadSub
	}
	return claims, noReason
}

// parseVapidHeader splits "vapid t=<jwt>, k=<key>" (scheme case-insensitive, parameters in any
// order). The legacy "WebPush <jwt>" scheme is refused.
func parseVapidHeader(v string) (token, key string, ok bool) {
	scheme, params, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "vapid") {
		return "", "", false
	}
	for part := range strings.SplitSeq(params, ",") {
		name, val, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found || val == "" {
			return "", "", false
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "t":
			if token != "" {
				return "", "", false
			}
			token = strings.TrimSpace(val)
		case "k":
			if key != "" {
				return "", "", false
			}
			key = strings.TrimSpace(val)
		default:
			return "", "", false
		}
	}
	return token, key, token != "" && key != ""
}

// verifyJWT checks a compact ES256 JWS against pub: header alg ES256, a 64-byte r||s signature
// over "header.payload", and claims that decode. exp may be any JSON number.
func verifyJWT(token string, pub *ecdsa.PublicKey) (Claims, bool) {
	return readJWT(token, pub)
}

// readJWT is verifyJWT, except that a nil pub skips the signature check (the decoding and
// every other rule still apply): Config.Sample's unsampled pushes.
func readJWT(token string, pub *ecdsa.PublicKey) (Claims, bool) {
	h, rest, ok1 := strings.Cut(token, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") {
		return Claims{}, false
	}
	var header struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	if !decodeSegment(h, &header) || header.Alg != "ES256" || (header.Typ != "" && !strings.EqualFold(header.Typ, "JWT")) {
		return Claims{}, false
	}
	sb, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(sb) != 64 {
		return Claims{}, false
	}
	digest := sha256.Sum256([]byte(token[:len(h)+1+len(p)]))
	r, s := new(big.Int).SetBytes(sb[:32]), new(big.Int).SetBytes(sb[32:])
	if pub != nil && !ecdsa.Verify(pub, digest[:], r, s) {
		return Claims{}, false
	}
	var raw struct {
		Aud any             `json:"aud"`
		Exp json.RawMessage `json:"exp"`
		Sub any             `json:"sub"`
	}
	if !decodeSegment(p, &raw) {
		return Claims{}, false
	}
	var c Claims
	c.Aud, _ = raw.Aud.(string) // an array aud is not an origin: it fails the aud check
	c.Sub, _ = raw.Sub.(string)
	// exp must be a JSON number (services refuse "exp": "123"); anything else stays 0, which
	// fails the expiry check.
	if f, err := strconv.ParseFloat(string(raw.Exp), 64); err == nil && f < math.MaxInt64 && f > math.MinInt64 {
		c.Exp = int64(f)
	}
	return c, true
}

// decodeSegment reads a JWS header or payload segment into v: base64url without padding, then
// JSON.
func decodeSegment(seg string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	return err == nil && json.Unmarshal(b, v) == nil
}

// appleSubject applies Apple's rules for sub: a real mailto: or https: URL; localhost, .local
// names, spaces and "mailto:mailto:" are refused (docs/providers.md, 403 BadJwtToken).
func appleSubject(sub string) bool {
	if sub == "" || strings.ContainsFunc(sub, unicode.IsSpace) {
		return false
	}
	lower := strings.ToLower(sub)
	switch {
	case strings.HasPrefix(lower, "mailto:"):
		addr := strings.TrimPrefix(lower, "mailto:")
		if strings.HasPrefix(addr, "mailto:") {
			return false
		}
		at := strings.LastIndexByte(addr, '@')
		if at <= 0 {
			return false
		}
		domain, _, _ := strings.Cut(addr[at+1:], "?")
		return realDomain(domain)
	case strings.HasPrefix(lower, "https:"):
		u, err := url.Parse(sub)
		if err != nil || u.Host == "" {
			return false
		}
		return realDomain(u.Hostname())
	}
	return false
}

func realDomain(d string) bool {
	d = strings.TrimSuffix(strings.ToLower(d), ".")
	switch {
	case d == "", d == "localhost", strings.HasSuffix(d, ".localhost"), d == "local", strings.HasSuffix(d, ".local"):
		return false
	}
	return true
}

// maxVerified bounds the signature cache; a sender signs one JWT per (key, audience) and reuses
// it for hours, so a small cache saves pushsim an ECDSA verify on nearly every push.
const maxVerified = 4096

// verifiedCache remembers JWTs whose signature verified, keyed by token and key. Only the
// signature and decoding are cached; exp, aud and the rest are checked on every push.
type verifiedCache struct {
	mu sync.Mutex
	m  map[string]Claims // guarded by mu
	// seen holds every (token, key) pair met since the last reset, to count signatures. A
	// sender that signs per message (webpush-go) fills it; past maxSeen it starts over, so a
	// token seen before the restart counts again: the count errs high, never low.
	seen   map[string]struct{} // guarded by mu
	tokens uint64              // guarded by mu
}

// maxSeen bounds the signature count's set: about 300 bytes a token, 300 MB at most.
const maxSeen = 1 << 20

func (c *verifiedCache) verify(token string, key []byte, pub *ecdsa.PublicKey, checkSig bool) (Claims, bool) {
	id := token + "|" + string(key)
	c.mu.Lock()
	claims, ok := c.m[id]
	if c.seen == nil || len(c.seen) >= maxSeen {
		c.seen = make(map[string]struct{})
	}
	if _, dup := c.seen[id]; !dup {
		c.seen[id] = struct{}{}
		c.tokens++
	}
	c.mu.Unlock()
	if ok {
		return claims, true
	}
	if !checkSig {
		return readJWT(token, nil)
	}
	claims, ok = verifyJWT(token, pub)
	if !ok {
		return Claims{}, false
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxVerified {
		c.m = make(map[string]Claims)
	}
	c.m[id] = claims
	c.mu.Unlock()
	return claims, true
}

// count is how many distinct (token, key) pairs were seen since the last reset: the number of
// JWTs the senders signed, as far as the push service can tell.
func (c *verifiedCache) count() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens
}

func (c *verifiedCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen, c.tokens = nil, 0
}
