package stream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// CreateCampaign writes the create entry of campaign raw (a JSON object: docs/job-format.md,
// "Campaigns") to the bulk intake of the campaign's shard. It checks the campaign first, as a
// worker will, and writes nothing when it is invalid. A worker creates the campaign when it
// reads the entry; a batch of recipients written before that waits for it.
func (p *Producer) CreateCampaign(ctx context.Context, raw []byte) (id string, err error) {
	c, err := job.DecodeCampaign(`{"create_campaign":`+string(raw)+`}`, time.Now())
	if err != nil {
		return "", fmt.Errorf("stream: create campaign: %w", err)
	}
	if err := p.checkOnce(ctx); err != nil {
		return "", err
	}
	entry := `{"create_campaign":` + compactJSON(raw) + `}`
	if err := p.c.XAdd(ctx, &redis.XAddArgs{Stream: KeysFor(p.prefix, ShardOf(c.ID, p.shards)).BulkIntake, Values: []any{"job", entry}}).Err(); err != nil {
		return "", fmt.Errorf("stream: create campaign: %w", err)
	}
	return c.ID, nil
}

// maxBatchBytes keeps an add_recipients entry under the entry limit with room for its frame.
const maxBatchBytes = job.MaxEntryBytes - 1024

// AddRecipients writes recipients (each a PushSubscription JSON object, or {"recipient": KEY,
// "subscription": {...}}) to campaign id, in add_recipients entries of at most
// job.MaxRecipientsPerBatch recipients and job.MaxEntryBytes bytes, in one pipeline. A
// recipient that is not valid JSON is refused before anything is written; the other checks
// are the workers' (an invalid recipient gets a dead record with its reason). It returns how
// many recipients, from the first, were written before any failure.
func (p *Producer) AddRecipients(ctx context.Context, id string, recipients ...[]byte) (int, error) {
	if err := job.CheckCampaignID(id); err != nil {
		return 0, fmt.Errorf("stream: add recipients: campaign id: %w", err)
	}
	if err := p.checkOnce(ctx); err != nil {
		return 0, err
	}
	var batches []string
	var ends []int
	var b strings.Builder
	run := make([]byte, 8)
	if _, err := rand.Read(run); err != nil {
		return 0, fmt.Errorf("stream: add recipients: %w", err)
	}
	var head string
	n := 0
	newBatch := func() {
		// A batch id of its own, so that a batch written twice (a pipeline the client sends
		// again after a lost answer) adds its recipients once.
		head = `{"add_recipients":{"campaign":"` + id + `","batch":"` + hex.EncodeToString(run) + "-" + strconv.Itoa(len(batches)) + `","recipients":[`
	}
	newBatch()
	flush := func(end int) {
		if n > 0 {
			b.WriteString("]}}")
			batches = append(batches, b.String())
			ends = append(ends, end)
		}
		b.Reset()
		n = 0
		newBatch()
	}
	for i, r := range recipients {
		c := compactJSON(r)
		if !json.Valid([]byte(c)) {
			return 0, fmt.Errorf("stream: add recipients: recipient %d is not JSON", i)
		}
		if len(head)+len(c)+4 > maxBatchBytes {
			return 0, fmt.Errorf("stream: add recipients: recipient %d is %d bytes; at most %d", i, len(c), maxBatchBytes-len(head)-4)
		}
		if n == job.MaxRecipientsPerBatch || (n > 0 && b.Len()+len(c)+4 > maxBatchBytes) {
			flush(i)
		}
		if n == 0 {
			b.WriteString(head)
		} else {
			b.WriteByte(',')
		}
		b.WriteString(c)
		n++
	}
	flush(len(recipients))
	intake := KeysFor(p.prefix, ShardOf(id, p.shards)).BulkIntake
	done := 0
	// A pipeline of pipelineBatches entries at most (a few MB), so that a large campaign's
	// write never outlasts the client's write timeout.
	for from := 0; from < len(batches); from += pipelineBatches {
		to := min(from+pipelineBatches, len(batches))
		pipe := p.c.Pipeline()
		cmds := make([]*redis.StringCmd, to-from)
		for i, e := range batches[from:to] {
			cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: intake, Values: []any{"job", e}})
		}
		_, _ = pipe.Exec(ctx) // the errors are on each command
		for i, c := range cmds {
			if err := c.Err(); err != nil {
				return done, fmt.Errorf("stream: add recipients: %w", err)
			}
			done = ends[from+i]
		}
	}
	return done, nil
}

// pipelineBatches is how many add_recipients entries AddRecipients sends in one pipeline.
const pipelineBatches = 32

func (p *Producer) checkOnce(ctx context.Context) error {
	if p.checked.Load() {
		return nil
	}
	if err := checkShards(ctx, p.c, p.prefix, p.shards, true); err != nil {
		return err
	}
	p.checked.Store(true)
	return nil
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
