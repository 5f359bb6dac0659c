package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// gateway runs the whole pipeline as `gateway-worker run` in a process of its own: with rates
// far above what one machine sends (the worker's own cost), or, paced, at the shipped
// registry's rates, where the buckets rather than the slots decide when each job goes. Without
// linger the worker runs with --commit-linger 0 and --lane-gather 0, so that the paced rows
// show what those waits cost and save. As a campaign, the backlog is one campaign of the same
// message to every subscription rather than a job each.
func (env *runEnv) gateway(ctx context.Context, paced, linger, campaign bool) (Row, error) {
	row := Row{Name: contenderGateway, What: "gateway-worker run: intake, lanes, limits, send, ledger; rates above what one machine sends"}
	env.campaign = campaign
	defer func() { env.campaign = false }()
	switch {
	case campaign:
		row = Row{Name: contenderCampaign, What: "the same backlog as one campaign (bulk): the message stored once, its recipients expanded into the lanes"}
	case paced && linger:
		row = Row{Name: contenderPaced, What: "the same at the shipped registry.yaml's rates and bursts (" + shippedRates() + ")"}
	case paced:
		row = Row{Name: contenderNoLinger, What: "gateway-paced with --commit-linger 0 --lane-gather 0"}
	}
	prefix := fmt.Sprintf("benchgw%d", time.Now().UnixNano()%1_000_000)
	reg, err := env.writeRegistry("bench-registry.yaml", paced)
	if err != nil {
		return row, err
	}
	statsFile := filepath.Join(env.dir, "gateway-stats.json")
	argv := env.workerArgv(prefix, reg, "--stats-file", statsFile)
	if !linger {
		argv = append(argv, "--commit-linger", "0", "--lane-gather", "0")
	}
	if env.o.Profile {
		abs, err := filepath.Abs(filepath.Join(env.o.Out, "bench-"+row.Name+".pprof"))
		if err != nil {
			return row, err
		}
		argv = append(argv, "--cpu-profile", abs)
		row.Profile = abs
	}
	store := inspect.New(env.rdb, stream.Options{Prefix: prefix})
	keys := store.Keys(0)
	ph, _, err := env.measure(ctx, argv, "", prefix, &keys)
	if err != nil {
		return row, err
	}
	var st cli.RunStats
	b, err := os.ReadFile(statsFile)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return row, fmt.Errorf("worker stats: %w", err)
	}
	jobs := len(env.warm) + len(env.subs) + env.o.LatencyMessages
	row.fill(env, ph)
	row.RedisRoundTripsPerJob = float64(st.RedisRoundTrips) / float64(jobs)
	row.SignaturesSelf = int64(st.VAPIDSignatures)
	// Every job must have its ledger record: a fast gateway that loses jobs is not a result.
	counts, err := store.Counts(ctx)
	if err != nil {
		return row, err
	}
	row.Ledger = counts["results"]
	if counts["results"]+counts["dead"] != int64(jobs) {
		return row, fmt.Errorf("%d jobs enqueued but %d ledger and %d dead records", jobs, counts["results"], counts["dead"])
	}
	return row, nil
}

// workerArgv is the command line of `gateway-worker run` on prefix with the registry file reg,
// every push service's host sent to pushsim, and extra flags after the common ones.
func (env *runEnv) workerArgv(prefix, reg string, extra ...string) []string {
	argv := []string{env.worker, "run", "--http", "", "--redis", env.redisURL, "--prefix", prefix, "--registry", reg,
		"--vapid-key", env.keyFile, "--subject", vapidSubject, "--ca-file", env.sim.CAFile(),
		"--log-level", "warn", "--grace", "10s"}
	argv = append(argv, extra...)
	for _, ct := range env.connectTo() {
		argv = append(argv, "--connect-to", ct)
	}
	return argv
}

// connectTo sends every host the subscriptions use to pushsim.
func (env *runEnv) connectTo() []string {
	cts := env.sim.ConnectTo()
	for _, h := range unknownHosts {
		cts = append(cts, net.JoinHostPort(h, "443")+"="+env.sim.Addr())
	}
	return cts
}

// writeRegistry writes registryYAML to name in the run's directory, for a worker's --registry,
// and returns the file's path.
func (env *runEnv) writeRegistry(name string, paced bool) (string, error) {
	yml, err := registryYAML(env, paced)
	if err != nil {
		return "", err
	}
	path := filepath.Join(env.dir, name)
	return path, os.WriteFile(path, []byte(yml), 0o644)
}

// registryYAML is registry.yaml for the bench: the shipped hosts and the contenders'
// concurrency shared by the mix (at least one slot a provider), with rates far above what one
// machine can send (the bench measures cost, not the fleet's rate limits) or, paced, the
// shipped registry's rates and bursts.
func registryYAML(env *runEnv, paced bool) (string, error) {
	mix, _ := parseMix(env.o.Mix)
	alloc := shareSlots(mix, env.o.Concurrency)
	shipped, err := providers.Parse("registry.yaml", webpushgateway.DefaultRegistry)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# written by gateway-lab bench\nversion: 1\nproviders:\n")
	entry := func(id, kind string, hosts []string, p string) error {
		rate, burst := 1_000_000.0, 100_000
		if paced {
			sp, ok := shipped.Provider(id)
			if !ok {
				return fmt.Errorf("the shipped registry has no provider %q", id)
			}
			rate, burst = sp.Rate, sp.Burst
		}
		fmt.Fprintf(&b, "  - id: %s\n", id)
		if kind != "" {
			fmt.Fprintf(&b, "    kind: %s\n", kind)
		}
		if len(hosts) > 0 {
			fmt.Fprintf(&b, "    hosts: [%s]\n", strings.Join(hosts, ", "))
		}
		fmt.Fprintf(&b, "    rate: %g\n    burst: %d\n    max_in_flight: %d\n", rate, burst, alloc[p])
		return nil
	}
	for _, e := range []struct {
		id, kind string
		hosts    []string
		mix      string
	}{
		{benchProviders[0], "", []string{"fcm.googleapis.com", "android.googleapis.com"}, "fcm"},
		{benchProviders[1], "", []string{"updates.push.services.mozilla.com", "push.services.mozilla.com"}, "autopush"},
		{benchProviders[2], "", []string{"web.push.apple.com"}, "apple"},
		{benchProviders[3], "", []string{"notify.windows.com"}, "wns"},
		{benchProviders[4], "generic", nil, "unknown"},
	} {
		if err := entry(e.id, e.kind, e.hosts, e.mix); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// benchProviders are the providers of the bench's registry, in its order.
var benchProviders = []string{"fcm", "autopush", "apple", "wns", "fallback"}

// shippedRates lists the shipped registry's rates, for the paced row's description.
func shippedRates() string {
	reg, err := providers.Parse("registry.yaml", webpushgateway.DefaultRegistry)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, p := range reg.Providers() {
		parts = append(parts, fmt.Sprintf("%s %g/s", p.ID, p.Rate))
	}
	return strings.Join(parts, ", ")
}

// redisCPU is the CPU time the Redis server has used (INFO cpu: used_cpu_sys + used_cpu_user).
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %q", line)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// shareSlots splits total in-flight slots over the mix by weight (largest remainders), at least
// one a provider, so the gateway has the same concurrency as the other contenders.
func shareSlots(mix []mixShare, total int) map[string]int {
	out := map[string]int{}
	type rem struct {
		p string
		r float64
	}
	var rems []rem
	left := total
	for _, m := range mix {
		exact := m.weight * float64(total)
		out[m.provider] = max(1, int(exact))
		left -= out[m.provider]
		rems = append(rems, rem{m.provider, exact - math.Floor(exact)})
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].r > rems[j].r })
	for i := 0; left > 0 && len(rems) > 0; i = (i + 1) % len(rems) {
		out[rems[i].p]++
		left--
	}
	return out
}

// usedMemory is what the Redis server holds (INFO memory: used_memory), in bytes.
func usedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO memory: %q", line)
			}
			return n, nil
		}
	}
	return 0, errors.New("INFO memory: no used_memory")
}

// commandCalls is the number of commands Redis has run, scripts' own calls included.
func commandCalls(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		_, rest, ok := strings.Cut(line, "calls=")
		// The bench's own INFO calls are not the worker's.
		if !ok || !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %q", line)
		}
		total += n
	}
	return total, nil
}

// plainConsumer runs a contender that reads the stream itself (webpushgo.go, benchnode/).
func (env *runEnv) plainConsumer(ctx context.Context, name string, argv []string) (Row, error) {
	row := Row{Name: name}
	switch name {
	case contenderWebpushGo:
		row.What = fmt.Sprintf("XREADGROUP + webpush-go SendNotification (RecordSize %d) + XACK per message", webpushGoRecordSize)
	case contenderNode:
		row.What = "XREADGROUP + web-push sendNotification (Node " + nodeVersion() + ") + XACK per message"
	}
	prefix := fmt.Sprintf("bench%s%d", strings.ReplaceAll(name, "-", ""), time.Now().UnixNano()%1_000_000)
	key := stream.KeysFor(prefix, 0).Intake
	const group = "bench"
	if err := env.rdb.XGroupCreateMkStream(ctx, key, group, "0").Err(); err != nil {
		return row, err
	}
	var cfg consumerConfig
	cfg.Redis, cfg.Stream, cfg.Group, cfg.Consumer = env.redisURL, key, group, name+"-1"
	cfg.Concurrency, cfg.Batch = env.o.Concurrency, env.o.Concurrency
	cfg.Connect, cfg.CAFile = env.sim.Addr(), env.sim.CAFile()
	cfg.VAPID.Subject, cfg.VAPID.PublicKey, cfg.VAPID.PrivateKey = vapidSubject, env.key.PublicKey(), env.privB64
	cfgFile := filepath.Join(env.dir, name+".json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		return row, err
	}
	// Node resolves its packages from the folder it runs in: the consumer's own.
	ph, _, err := env.measure(ctx, append(argv, cfgFile), filepath.Dir(argv[1]), prefix, nil)
	if err != nil {
		return row, err
	}
	row.fill(env, ph)
	return row, nil
}

// floor is the RFC 8291 encryption alone, in this process, while nothing else runs in it: a
// fresh key pair, ECDH, HKDF and AES-GCM per message, for the same payload.
func (env *runEnv) floor() (Row, error) {
	row := Row{Name: contenderFloor, What: "ece.Encrypt alone: key pair, ECDH, HKDF, AES-GCM (this process, one goroutine)"}
	n := min(env.o.Messages, 5000)
	keys := make([]*ece.Keys, 0, 64)
	for _, s := range env.subs[:min(64, len(env.subs))] {
		k, err := ece.ParseKeys(s.Keys.P256dh, s.Keys.Auth)
		if err != nil {
			return row, err
		}
		keys = append(keys, k)
	}
	payload := []byte(env.payload)
	var buf []byte
	cpu0 := selfCPU()
	wall0 := time.Now()
	for i := range n {
		var err error
		if buf, err = ece.AppendEncrypt(buf[:0], keys[i%len(keys)], payload, ece.Options{}); err != nil {
			return row, err
		}
	}
	wall := time.Since(wall0)
	cpu := selfCPU() - cpu0
	row.Messages = n
	row.Delivered = n
	row.CPUPerMsg = float64(cpu.Microseconds()) / float64(n)
	row.MsgsPerSec = float64(n) / wall.Seconds()
	row.BytesPerMsg = float64(len(buf))
	row.Floor = true
	return row, nil
}
