package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

// consumerConfig is what Run hands each plain consumer (this file's webpush-go one and
// benchnode/consumer.js) in a JSON file: the stream to read and where pushsim is.
type consumerConfig struct {
	Redis       string `json:"redis"`
	Stream      string `json:"stream"`
	Group       string `json:"group"`
	Consumer    string `json:"consumer"`
	Concurrency int    `json:"concurrency"`
	Batch       int    `json:"batch"`
	// Connect is pushsim's address: every push host is dialled there, with its own name in SNI.
	Connect string `json:"connect"`
	CAFile  string `json:"ca_file"`
	VAPID   struct {
		Subject    string `json:"subject"`
		PublicKey  string `json:"public_key"`
		PrivateKey string `json:"private_key"`
	} `json:"vapid"`
}

// consumerSummary is the one JSON line a plain consumer prints when it stops.
type consumerSummary struct {
	Sent   int            `json:"sent"`
	Failed int            `json:"failed"`
	Errors map[string]int `json:"errors"`
}

// webpushGoRecordSize is the record size the webpush-go consumer asks for. Left at its default
// (4096), webpush-go pads every body to 4182 bytes, which FCM, Autopush and Apple refuse with
// 413 (docs/providers.md); 3070 is the size Mozilla documents for constrained devices and the one
// webpush-go's own tests use: what a Go user who made it work would have.
const webpushGoRecordSize = 3070

// WebpushGoContender is the bench's second contender, run by Run in a process of its own
// (`gateway-lab bench-webpush-go CONFIG.json`): the consumer a Go user writes without this
// project. It reads the stream configFile names in batches with XREADGROUP, sends each job with
// webpush-go's SendNotification through one shared HTTP client, never more than Concurrency at
// once, and acknowledges each message with its own XACK. It keeps no ledger, no retries and no
// limits: it is the floor a gateway must beat. When ctx ends it waits for its sends and prints
// its summary, one JSON line, to stdout.
func WebpushGoContender(ctx context.Context, configFile string, stdout io.Writer) error {
	var cfg consumerConfig
	b, err := os.ReadFile(configFile)
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err == nil && (cfg.Concurrency < 1 || cfg.Batch < 1) {
		err = fmt.Errorf("concurrency and batch must be at least 1")
	}
	if err != nil {
		return err
	}
	// The same garbage collection target as the gateway's worker, so that the comparison is of
	// the code, not of a runtime setting either could use.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cli.DefaultGOGC)
	}
	sum, err := runWebpushGoConsumer(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
}

func runWebpushGoConsumer(ctx context.Context, cfg consumerConfig, stdout io.Writer) (consumerSummary, error) {
	sum := consumerSummary{Errors: map[string]int{}}
	opt, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return sum, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return sum, err
	}
	roots, err := adapter.LoadRootCAs(cfg.CAFile)
	if err != nil {
		return sum, err
	}
	// http.DefaultTransport's settings (HTTP/2 included), pointed at pushsim.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	tr.MaxIdleConnsPerHost = cfg.Concurrency
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, cfg.Connect)
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	fmt.Fprintln(stdout, "ready")

	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, cfg.Concurrency)
	)
	count := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		if key == "" {
			sum.Sent++
			return
		}
		sum.Failed++
		sum.Errors[key]++
	}
	// Sends finish after a stop: they are in flight, and their messages would stay pending.
	sendCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		slots <- struct{}{} // at least one free slot before reading
		free := 1
		for free < min(cfg.Batch, cfg.Concurrency) && len(slots) < cap(slots) {
			slots <- struct{}{}
			free++
		}
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: cfg.Group, Consumer: cfg.Consumer, Streams: []string{cfg.Stream, ">"},
			Count: int64(free), Block: 100 * time.Millisecond,
		}).Result()
		var msgs []redis.XMessage
		if err == nil && len(res) > 0 {
			msgs = res[0].Messages
		}
		for range free - len(msgs) {
			<-slots
		}
		if err != nil && err != redis.Nil && ctx.Err() == nil {
			count("redis: " + err.Error())
			time.Sleep(100 * time.Millisecond)
		}
		for _, m := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				count(sendWebpushGo(sendCtx, client, cfg, m))
				if err := rdb.XAck(sendCtx, cfg.Stream, cfg.Group, m.ID).Err(); err != nil {
					count("xack: " + err.Error())
				}
			}()
		}
	}
	wg.Wait()
	return sum, nil
}

// sendWebpushGo sends one stream message; "" when the push service accepted it, else what
// went wrong (an HTTP status or an error class) for the summary.
func sendWebpushGo(ctx context.Context, client *http.Client, cfg consumerConfig, m redis.XMessage) string {
	raw, _ := m.Values["job"].(string)
	var job struct {
		Subscription webpush.Subscription `json:"subscription"`
		Payload      string               `json:"payload"`
		TTL          *int                 `json:"ttl"`
		Urgency      string               `json:"urgency"`
		Topic        string               `json:"topic"`
	}
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		return "bad job"
	}
	ttl := 2419200
	if job.TTL != nil {
		ttl = *job.TTL
	}
	resp, err := webpush.SendNotificationWithContext(ctx, []byte(job.Payload), &job.Subscription, &webpush.Options{
		// webpush-go puts "mailto:" in front of any subject that is not https:, so a
		// "mailto:x" subject would go out as "mailto:mailto:x", which Apple refuses.
		HTTPClient: client, Subscriber: strings.TrimPrefix(cfg.VAPID.Subject, "mailto:"), RecordSize: webpushGoRecordSize,
		VAPIDPublicKey: cfg.VAPID.PublicKey, VAPIDPrivateKey: cfg.VAPID.PrivateKey,
		TTL: ttl, Urgency: webpush.Urgency(job.Urgency), Topic: job.Topic,
	})
	if err != nil {
		return "transport"
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 == 2 {
		return ""
	}
	return strconv.Itoa(resp.StatusCode)
}
