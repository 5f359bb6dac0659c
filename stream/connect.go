package stream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConnectOptions adjust the clients Connect builds. Zero values keep go-redis defaults.
type ConnectOptions struct {
	// PoolSize is the main client's pool (scripts and short commands).
	PoolSize int
	// BlockingPoolSize is the pool of the client used for XREADGROUP BLOCK; every intake reader
	// and lane consumer holds one connection while it blocks, so size it for shards x (1 +
	// providers) plus headroom.
	BlockingPoolSize int
	// TLS replaces the TLS configuration of rediss URLs (a private CA, a client certificate).
	TLS *tls.Config
	// ClientName is set with CLIENT SETNAME on every connection (visible in CLIENT LIST).
	ClientName                             string
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
}

// Connect builds the main and the blocking client for a Redis URL:
//
//	redis://[user:password@]host:port[/db]             single node (rediss:// for TLS, unix:// too)
//	redis+sentinel://[user:password@]host:port,host:port/mastername[/db][?sentinel_password=..&sentinel_username=..]
//	redis+cluster://[user:password@]host:port,host:port  Redis Cluster
//
// (rediss+sentinel and rediss+cluster use TLS.) Errors never repeat the password.
func Connect(rawURL string, extra ConnectOptions) (main, blocking redis.UniversalClient, err error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, nil, errors.New("stream: redis URL has no scheme (redis://, rediss://, redis+sentinel://, redis+cluster://)")
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, nil, fmt.Errorf("stream: redis URL: %s", redactErr(err, rawURL))
		}
		applySingle(o, extra, extra.PoolSize)
		b := *o
		applySingle(&b, extra, extra.BlockingPoolSize)
		return redis.NewClient(o), redis.NewClient(&b), nil
	case "redis+sentinel", "rediss+sentinel":
		o, err := parseSentinel(rawURL, scheme == "rediss+sentinel")
		if err != nil {
			return nil, nil, err
		}
		applyFailover(o, extra, extra.PoolSize)
		b := *o
		applyFailover(&b, extra, extra.BlockingPoolSize)
		return redis.NewFailoverClient(o), redis.NewFailoverClient(&b), nil
	case "redis+cluster", "rediss+cluster":
		o, err := parseCluster(rawURL, scheme == "rediss+cluster")
		if err != nil {
			return nil, nil, err
		}
		applyCluster(o, extra, extra.PoolSize)
		b := *o
		applyCluster(&b, extra, extra.BlockingPoolSize)
		return redis.NewClusterClient(o), redis.NewClusterClient(&b), nil
	}
	return nil, nil, fmt.Errorf("stream: unsupported redis URL scheme %q", scheme)
}

// redactErr keeps a password that go-redis may echo out of an error.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// clientFields are the settings every go-redis options type has, by address, so one function
// applies ConnectOptions to a single-node, failover or cluster configuration alike.
type clientFields struct {
	pool              *int
	tls               **tls.Config
	name              *string
	dial, read, write *time.Duration
}

func applySingle(o *redis.Options, x ConnectOptions, pool int) {
	apply(clientFields{&o.PoolSize, &o.TLSConfig, &o.ClientName, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}, x, pool)
}

func applyFailover(o *redis.FailoverOptions, x ConnectOptions, pool int) {
	apply(clientFields{&o.PoolSize, &o.TLSConfig, &o.ClientName, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}, x, pool)
}

func applyCluster(o *redis.ClusterOptions, x ConnectOptions, pool int) {
	apply(clientFields{&o.PoolSize, &o.TLSConfig, &o.ClientName, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}, x, pool)
}

func apply(f clientFields, x ConnectOptions, pool int) {
	if pool > 0 {
		*f.pool = pool
	}
	if x.TLS != nil && *f.tls != nil {
		*f.tls = x.TLS.Clone()
	}
	if x.ClientName != "" {
		*f.name = x.ClientName
	}
	setTimeouts(f.dial, f.read, f.write, x)
}

func setTimeouts(dial, read, write *time.Duration, x ConnectOptions) {
	if x.DialTimeout > 0 {
		*dial = x.DialTimeout
	}
	if x.ReadTimeout > 0 {
		*read = x.ReadTimeout
	}
	if x.WriteTimeout > 0 {
		*write = x.WriteTimeout
	}
}

// multiHost splits the host list of a sentinel or cluster URL and checks every host:port.
func multiHost(u *url.URL) ([]string, error) {
	var out []string
	for _, h := range strings.Split(u.Host, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			return nil, fmt.Errorf("stream: redis URL: host %q has no port", h)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, errors.New("stream: redis URL: no host")
	}
	return out, nil
}

func userPass(u *url.URL) (string, string) {
	if u.User == nil {
		return "", ""
	}
	pw, _ := u.User.Password()
	return u.User.Username(), pw
}

func parseSentinel(rawURL string, useTLS bool) (*redis.FailoverOptions, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("stream: redis URL: not a valid URL")
	}
	hosts, err := multiHost(u)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) == 0 || parts[0] == "" || len(parts) > 2 {
		return nil, errors.New("stream: redis+sentinel URL: the path must be /mastername or /mastername/db")
	}
	o := &redis.FailoverOptions{MasterName: parts[0], SentinelAddrs: hosts}
	if len(parts) == 2 {
		if o.DB, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("stream: redis+sentinel URL: db %q is not a number", parts[1])
		}
	}
	o.Username, o.Password = userPass(u)
	q := u.Query()
	o.SentinelUsername = q.Get("sentinel_username")
	o.SentinelPassword = q.Get("sentinel_password")
	if useTLS {
		o.TLSConfig = tlsFor(hosts[0])
	}
	return o, nil
}

// tlsFor verifies certificates against the first host's name, as go-redis's own URL parsers do.
func tlsFor(hostport string) *tls.Config {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	return &tls.Config{ServerName: h, MinVersion: tls.VersionTLS12}
}

func parseCluster(rawURL string, useTLS bool) (*redis.ClusterOptions, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("stream: redis URL: not a valid URL")
	}
	hosts, err := multiHost(u)
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, errors.New("stream: redis+cluster URL: Redis Cluster has only database 0")
	}
	o := &redis.ClusterOptions{Addrs: hosts}
	o.Username, o.Password = userPass(u)
	if useTLS {
		o.TLSConfig = tlsFor(hosts[0])
	}
	return o, nil
}
