package stream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// OpenOptions configure Open: the Store's Options, and how its connections are made. Zero
// values keep what the URL says, else go-redis's defaults.
type OpenOptions struct {
	Options
	// PoolSize is the main client's pool (scripts and short commands).
	PoolSize int
	// BlockingPoolSize is the pool of the client used for XREADGROUP BLOCK, and of the
	// intake's wait; every intake reader and lane consumer holds one connection while it
	// blocks, so size it for shards x (1 + providers) plus headroom.
	BlockingPoolSize int
	// TLS replaces the TLS configuration of rediss URLs (a private CA, a client certificate).
	TLS *tls.Config
	// ClientName is set with CLIENT SETNAME on every connection (visible in CLIENT LIST).
	ClientName                             string
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Hooks are added to every client Open makes, so one hook sees every command the Store
	// sends (a CallCounter counts them all); OpenClient adds them to its client.
	Hooks []redis.Hook
}

// clusterReloadInterval is how old a Redis Cluster client's slot map may grow before the next
// command reloads it (go-redis's ClusterStateReloadInterval, 60 s by default). A redirect
// (MOVED, ASK) reloads it at once, but a master that died answers nothing: until the reload,
// the client keeps dialling it for the slots its replica has taken over. A short interval
// makes the failover a few seconds of errors rather than a minute; the reload is one CLUSTER
// SLOTS, in the background.
const clusterReloadInterval = 2 * time.Second

// Open connects a Store to the Redis that rawURL names:
//
//	redis://[user:password@]host:port[/db]        a single node (rediss:// for TLS)
//	unix://[user:password@]/path/to/socket[?db=N]  a single node on a Unix socket
//	redis+sentinel://[user:password@]host:port,host:port/mastername[/db][?sentinel_username=..&sentinel_password=..]
//	redis+cluster://[user:password@]host:port,host:port  Redis Cluster
//
// rediss+sentinel and rediss+cluster use TLS. The user and password are the data nodes';
// sentinel_username and sentinel_password, the Sentinels'. Any other query parameter is one
// of go-redis's options (dial_timeout=3s, max_retries=5; see redis.ParseURL), and an unknown
// one is an error. Errors never repeat a password.
//
// The Store has three clients of its own: the main one, one for blocking reads (so that they
// cannot take the connections scripts need), and the one the intake waits on for new entries,
// whose connections refuse a reply larger than one entry may be (see ReadIntake). Close
// closes them all.
func Open(rawURL string, o OpenOptions) (*Store, error) {
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	t.apply(o)
	main, blocking, bell := t.client(o.PoolSize), t.client(o.BlockingPoolSize), t.doorbell(o.BlockingPoolSize)
	s := New(main, blocking, o.Options)
	s.bell, s.owned = bell, []redis.UniversalClient{main, blocking, bell}
	for _, c := range s.owned {
		addHooks(c, o.Hooks)
	}
	return s, nil
}

// OpenClient is a client of the Redis that rawURL names (the URLs of Open), of o.PoolSize
// connections, with o's TLS, name, timeouts and hooks: the one client of the operators'
// Inspector (stream/inspect.Open), of a Producer or Keyspace of a command's own, or of a tool
// that reads Redis beyond the gateway's keys (the lab's INFO figures). The caller closes it.
func OpenClient(rawURL string, o OpenOptions) (redis.UniversalClient, error) {
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	t.apply(o)
	c := t.client(o.PoolSize)
	addHooks(c, o.Hooks)
	return c, nil
}

func addHooks(c redis.UniversalClient, hooks []redis.Hook) {
	for _, h := range hooks {
		c.AddHook(h)
	}
}

// target is a parsed Redis URL: the options of the one kind of client it names.
type target struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

func parseURL(rawURL string) (*target, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, errors.New("stream: redis URL has no scheme (redis://, rediss://, unix://, redis+sentinel://, redis+cluster://)")
	}
	scheme = strings.ToLower(scheme)
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the whole URL, password and all.
		return nil, errors.New("stream: redis URL: not a valid URL (a password with reserved characters must be percent-encoded)")
	}
	t := &target{}
	switch scheme {
	case "redis", "rediss", "unix":
		t.single, err = redis.ParseURL(rawURL)
	case "redis+sentinel", "rediss+sentinel":
		t.failover, err = parseSentinel(u, strings.TrimSuffix(scheme, "+sentinel"))
	case "redis+cluster", "rediss+cluster":
		t.cluster, err = parseCluster(u, strings.TrimSuffix(scheme, "+cluster"))
	default:
		return nil, fmt.Errorf("stream: unsupported redis URL scheme %q", scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("stream: redis URL: %s", redact(err.Error(), u))
	}
	return t, nil
}

// parseSentinel reads a redis+sentinel URL with redis.ParseFailoverURL, whose URL names one
// Sentinel in its host, the others in addr parameters, the Sentinels' credentials in the user
// information and the data nodes' in the query.
func parseSentinel(u *url.URL, scheme string) (*redis.FailoverOptions, error) {
	hosts, err := hostList(u)
	if err != nil {
		return nil, err
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	if path[0] == "" || len(path) > 2 {
		return nil, errors.New("redis+sentinel: the path must be /mastername or /mastername/db")
	}
	q := u.Query()
	g := url.URL{Scheme: scheme, Host: hosts[0]}
	if su, sp := q.Get("sentinel_username"), q.Get("sentinel_password"); su != "" || sp != "" {
		g.User = url.UserPassword(su, sp)
	}
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	q.Set("master_name", path[0])
	if len(path) == 2 {
		g.Path = "/" + path[1]
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	if u.User != nil {
		q.Set("username", u.User.Username())
		if pw, ok := u.User.Password(); ok {
			q.Set("password", pw)
		}
	}
	g.RawQuery = q.Encode()
	return redis.ParseFailoverURL(g.String())
}

// parseCluster reads a redis+cluster URL with redis.ParseClusterURL, whose URL names one node
// in its host and the others in addr parameters.
func parseCluster(u *url.URL, scheme string) (*redis.ClusterOptions, error) {
	hosts, err := hostList(u)
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, errors.New("redis+cluster: Redis Cluster has only database 0")
	}
	q := u.Query()
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	g := url.URL{Scheme: scheme, User: u.User, Host: hosts[0], RawQuery: q.Encode()}
	o, err := redis.ParseClusterURL(g.String())
	if err != nil {
		return nil, err
	}
	o.ClusterStateReloadInterval = clusterReloadInterval
	return o, nil
}

// hostList is the host:port list of a sentinel or cluster URL. Every host needs its port:
// go-redis would take 6379 for a missing one, which is no Sentinel's.
func hostList(u *url.URL) ([]string, error) {
	var out []string
	for h := range strings.SplitSeq(u.Host, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			return nil, fmt.Errorf("host %q has no port", h)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, errors.New("no host")
	}
	return out, nil
}

// redact keeps the URL's passwords (the user information's, sentinel_password, password) out
// of a message go-redis may have quoted them in.
func redact(msg string, u *url.URL) string {
	var secrets []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
	}
	q := u.Query()
	secrets = append(append(secrets, q["sentinel_password"]...), q["password"]...)
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}

// fields are the settings of OpenOptions that every kind of go-redis options has, by address,
// so that one function sets them whatever the kind.
type fields struct {
	tls               **tls.Config
	name              *string
	dial, read, write *time.Duration
}

func (t *target) fields() fields {
	switch {
	case t.single != nil:
		o := t.single
		return fields{&o.TLSConfig, &o.ClientName, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}
	case t.failover != nil:
		o := t.failover
		return fields{&o.TLSConfig, &o.ClientName, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}
	default:
		o := t.cluster
		return fields{&o.TLSConfig, &o.ClientName, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout}
	}
}

// apply sets what o gives; what it leaves zero stays as the URL said.
func (t *target) apply(o OpenOptions) {
	f := t.fields()
	if o.TLS != nil && *f.tls != nil {
		*f.tls = o.TLS.Clone()
	}
	if o.ClientName != "" {
		*f.name = o.ClientName
	}
	for _, d := range []struct {
		set *time.Duration
		to  time.Duration
	}{{f.dial, o.DialTimeout}, {f.read, o.ReadTimeout}, {f.write, o.WriteTimeout}} {
		if d.to > 0 {
			*d.set = d.to
		}
	}
}

// client is a new client of the target's kind with a pool of its own, of pool connections
// at most (0: as the URL said, else go-redis's default). go-redis keeps and changes the
// options it is given, so each client gets a copy.
func (t *target) client(pool int) redis.UniversalClient {
	switch {
	case t.single != nil:
		o := *t.single
		setPool(&o.PoolSize, pool)
		return redis.NewClient(&o)
	case t.failover != nil:
		o := *t.failover
		setPool(&o.PoolSize, pool)
		return redis.NewFailoverClient(&o)
	default:
		o := *t.cluster
		setPool(&o.PoolSize, pool)
		return redis.NewClusterClient(&o)
	}
}

func setPool(dst *int, n int) {
	if n > 0 {
		*dst = n
	}
}
