package providers

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// builtin is what an entry gets for a setting that neither it nor defaults: sets. Conservative
// on purpose: an entry an operator added in a hurry should not flood an unknown service. The
// settings package limits also defaults take its Default* constants. As everywhere in the
// project, 0 switches off what may be off (per_recipient_in_flight, bulk_min_share) and is
// refused for what may not.
func builtin() Provider {
	return Provider{
		MaxTTL:                2419200 * time.Second,
		Rate:                  100,
		Burst:                 20,
		MaxInFlight:           64,
		MinInFlight:           8,
		RetryShare:            limits.DefaultRetryShare,
		BulkMinShare:          DefaultBulkMinShare,
		PerRecipientInFlight:  limits.DefaultPerRecipient,
		Timeout:               10 * time.Second,
		ConnectTimeout:        5 * time.Second,
		TLSTimeout:            5 * time.Second,
		ResponseHeaderTimeout: 8 * time.Second,
		Breaker: limits.BreakerConfig{
			FailureRatio: limits.DefaultFailureRatio,
			Window:       limits.DefaultWindow,
			MinSamples:   limits.DefaultMinSamples,
			Cooldown:     limits.DefaultCooldown,
			Probes:       limits.DefaultProbes,
		},
	}
}

// A setting is a provider field that defaults: may hold. parse stores the node's value in p and
// returns what is wrong with it, or "".
type setting struct {
	name  string // path below an entry: "rate", "breaker.window"
	parse func(n *yaml.Node, p *Provider) string
}

var settings = []setting{
	{"max_ttl", durationOf(func(p *Provider) *time.Duration { return &p.MaxTTL }, func(d time.Duration) string {
		switch {
		case d < 0:
			return "must not be negative, got " + d.String()
		case d > maxTTLLimit:
			return fmt.Sprintf("at most %s (no push service keeps a message that long), got %s", secs(maxTTLLimit), secs(d))
		}
		return ""
	})},
	{"rate", floatOf(func(p *Provider) *float64 { return &p.Rate }, func(f float64) string {
		switch {
		case f <= 0:
			return "must be more than 0 requests per second, got " + fmtFloat(f)
		case f > maxRate:
			return fmt.Sprintf("at most %d requests per second for the whole fleet, got %s", maxRate, fmtFloat(f))
		}
		return ""
	})},
	{"burst", intOf(func(p *Provider) *int { return &p.Burst }, within(1, maxBurst, "requests at once for the whole fleet"))},
	{"max_in_flight", intOf(func(p *Provider) *int { return &p.MaxInFlight }, within(1, MaxInFlight, inFlightWhy))},
	{"min_in_flight", intOf(func(p *Provider) *int { return &p.MinInFlight }, within(1, MaxInFlight, inFlightWhy))},
	{"retry_share", floatOf(func(p *Provider) *float64 { return &p.RetryShare }, fraction)},
	{"bulk_min_share", floatOf(func(p *Provider) *float64 { return &p.BulkMinShare }, func(f float64) string {
		if f < 0 || f > MaxBulkMinShare {
			return fmt.Sprintf("must be at least 0 and at most %s (more would put bulk before transactional jobs), got %s", fmtFloat(MaxBulkMinShare), fmtFloat(f))
		}
		return ""
	})},
	{"per_recipient_in_flight", intOf(func(p *Provider) *int { return &p.PerRecipientInFlight }, within(0, MaxInFlight, inFlightWhy))},
	{"timeout", durationOf(func(p *Provider) *time.Duration { return &p.Timeout }, between(maxTimeout))},
	{"connect_timeout", durationOf(func(p *Provider) *time.Duration { return &p.ConnectTimeout }, between(maxTimeout))},
	{"tls_timeout", durationOf(func(p *Provider) *time.Duration { return &p.TLSTimeout }, between(maxTimeout))},
	{"response_header_timeout", durationOf(func(p *Provider) *time.Duration { return &p.ResponseHeaderTimeout }, between(maxTimeout))},
	{"vapid_lifetime", durationOf(func(p *Provider) *time.Duration { return &p.VAPIDLifetime }, func(d time.Duration) string {
		if d > 0 && d < minVAPIDLifetime {
			return fmt.Sprintf("at least %s (a shorter token may expire on its way), got %s", minVAPIDLifetime, d)
		}
		return between(maxVAPIDLifetime)(d)
	})},
	{"proxy", parseProxySetting},
	{"breaker.failure_ratio", floatOf(func(p *Provider) *float64 { return &p.Breaker.FailureRatio }, fraction)},
	{"breaker.window", durationOf(func(p *Provider) *time.Duration { return &p.Breaker.Window }, between(maxBreakerSpan))},
	{"breaker.min_samples", intOf(func(p *Provider) *int { return &p.Breaker.MinSamples }, within(1, maxMinSamples, "outcomes (a breaker needing more never opens)"))},
	{"breaker.cooldown", durationOf(func(p *Provider) *time.Duration { return &p.Breaker.Cooldown }, between(maxBreakerSpan))},
	{"breaker.probes", intOf(func(p *Provider) *int { return &p.Breaker.Probes }, within(1, maxProbes, "requests (half-open lets about ten a second through)"))},
}

// Keys each mapping may hold, in the order the docs list them (suggestions search these).
var (
	topKeys     = []string{"version", "defaults", "budget", "host_breaker", "heartbeat", "providers"}
	entryKeys   = []string{"id", "kind", "hosts", "max_ttl", "rate", "burst", "max_in_flight", "min_in_flight", "retry_share", "bulk_min_share", "per_recipient_in_flight", "timeout", "connect_timeout", "tls_timeout", "response_header_timeout", "breaker", "vapid_lifetime", "proxy"}
	defaultKeys = []string{"max_ttl", "rate", "burst", "max_in_flight", "min_in_flight", "retry_share", "bulk_min_share", "per_recipient_in_flight", "timeout", "connect_timeout", "tls_timeout", "response_header_timeout", "breaker", "vapid_lifetime", "proxy"}
	breakerKeys = []string{"failure_ratio", "window", "min_samples", "cooldown", "probes"}
	kinds       = []string{KindFCM, KindAutopush, KindApple, KindWNS, KindGeneric}
)

// notInDefaults explains the entry keys defaults: refuses.
var notInDefaults = map[string]string{
	"id":    "every entry names its own id; it cannot be a default",
	"hosts": "a host belongs to one entry; hosts cannot be a default",
	"kind":  "kind cannot be a default: it follows each entry's id (fcm, autopush, apple, wns; generic otherwise)",
}

// durationOf, intOf and floatOf build the parser of one field of T (a Provider, or a top-level
// section such as Budget) from valueOf and the decoder of the field's type.
func durationOf[T any](field func(*T) *time.Duration, check func(time.Duration) string) func(*yaml.Node, *T) string {
	return valueOf(decodeDuration, field, check)
}

func intOf[T any](field func(*T) *int, check func(int) string) func(*yaml.Node, *T) string {
	return valueOf(decodeInt, field, check)
}

func floatOf[T any](field func(*T) *float64, check func(float64) string) func(*yaml.Node, *T) string {
	return valueOf(decodeFloat, field, check)
}

// valueOf is the parser of one field: decode the node (decode says what it wanted when the
// node is not a V), then check the value, then store it.
func valueOf[T, V any](decode func(*yaml.Node) (V, string), field func(*T) *V, check func(V) string) func(*yaml.Node, *T) string {
	return func(n *yaml.Node, p *T) string {
		v, msg := decode(n)
		if msg == "" {
			msg = check(v)
		}
		if msg == "" {
			*field(p) = v
		}
		return msg
	}
}

func decodeDuration(n *yaml.Node) (time.Duration, string) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return 0, "want a duration like 10s, got " + describe(n)
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return 0, fmt.Sprintf("want a duration like 10s, got %s (no unit: write %ss)", describe(n), clip(n.Value))
		}
		return 0, "want a duration like 10s, got " + describe(n)
	}
	return d, ""
}

func decodeInt(n *yaml.Node) (int, string) {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return 0, "want a whole number, got " + describe(n)
	}
	return v, ""
}

func decodeFloat(n *yaml.Node) (float64, string) {
	var v float64
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&v) != nil {
		return 0, "want a number, got " + describe(n)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, "want a finite number, got " + describe(n)
	}
	return v, ""
}

// fraction refuses numbers that are not in (0, 1].
func fraction(f float64) string {
	if f <= 0 || f > 1 {
		return "must be more than 0 and at most 1, got " + fmtFloat(f)
	}
	return ""
}

// inFlightWhy is what the in-flight bounds say about themselves.
const inFlightWhy = "per replica (run more replicas for more)"

// within refuses whole numbers that are not in [min, max]; why follows the upper bound in the
// message ("at most 10000 per replica (...), got 20000").
func within(min, max int, why string) func(int) string {
	return func(v int) string {
		switch {
		case v < min:
			return fmt.Sprintf("must be at least %d, got %d", min, v)
		case v > max:
			return fmt.Sprintf("at most %d %s, got %d", max, why, v)
		}
		return ""
	}
}

// between refuses durations that are not in (0, max].
func between(max time.Duration) func(time.Duration) string {
	return func(d time.Duration) string {
		switch {
		case d <= 0:
			return "must be more than 0, got " + d.String()
		case d > max:
			return fmt.Sprintf("at most %s, got %s", max, d)
		}
		return ""
	}
}

// secs prints a TTL the way registry.yaml writes them, in seconds.
func secs(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// describe names what a node holds, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!str", "!!binary", "!!timestamp":
			return strconv.Quote(clip(n.Value))
		}
		return clip(n.Value)
	}
	return "nothing"
}

// clip keeps messages one readable line whatever the file holds.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	return s
}

// unknownKey is the problem text for a key not in known, with the closest known key when one
// is near enough to be what was meant.
func unknownKey(key string, known []string) string {
	if key == "<<" {
		return "YAML merge keys are not supported (put shared settings under defaults:)"
	}
	msg := "unknown field"
	if s := suggest(key, known); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	return msg
}

// suggest returns the known word closest to w: same letters ignoring case, '-' and '_' first
// ("maxInFlight", "max-ttl"), else the smallest edit distance up to a third of w's length.
func suggest(w string, known []string) string {
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	for _, k := range known {
		if fold(k) == fold(w) {
			return k
		}
	}
	best, bestD := "", max(1, min(3, (len(w)+1)/3))+1
	for _, k := range known {
		if d := EditDistance(strings.ToLower(w), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// EditDistance is the optimal string alignment distance between a and b, by bytes (Levenshtein
// plus adjacent transpositions, so "brust" is one edit from "burst"): what the registry's
// suggestions and the commands' "did you mean" measure. Long input is not measured and is as
// far as anything can be: a fuzzer or a pasted paragraph should not cost quadratic time.
func EditDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	// d[i][j] is the distance between a[:i] and b[:j]; three rows are enough.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
