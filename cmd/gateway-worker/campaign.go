package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

func cmdCampaignCreate(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.register(fs)
	var cf cli.CampaignFlags
	cf.Register(fs)
	fs.Group("Output")
	wait := fs.Duration("wait", 10*time.Second, "wait up to `DURATION` for a worker to create the campaign (0: do not wait)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	raw, err := cf.JSON()
	if err != nil {
		return fs.Fail(err)
	}
	p, insp, closeRedis, code := rf.openWriter(fs, stderr)
	if p == nil {
		return code
	}
	defer closeRedis()
	id := cf.ID
	if st, err := insp.Campaign(ctx, id, time.Now()); err == nil && st.HasMessage {
		fmt.Fprintf(stdout, "campaign %s exists already (%s, %d recipients added): nothing written\n", id, st.State, st.Added)
		return cli.ExitNo
	}
	// Redis's clock, not this host's: a dead record of this entry is written after it.
	since, err := insp.Time(ctx)
	if err == nil {
		_, err = p.CreateCampaign(ctx, raw)
	}
	if err != nil {
		return redisFailure(stderr, fs.Name(), err)
	}
	var st *inspect.CampaignStatus
	reason := ""
	if *wait > 0 {
		if st, reason, err = insp.AwaitCampaign(ctx, id, since, *wait); err != nil {
			return unavailable(stderr, fs.Name(), err)
		}
	}
	switch {
	case st != nil:
		fmt.Fprintf(stdout, "campaign %s created (%s, %s): add its recipients with `gateway-worker campaign add %s FILE`\n", id, st.State, st.Class, id)
	case reason != "":
		fmt.Fprintf(stdout, "campaign %s not created: a worker dead-lettered its create entry: %s\n", id, reason)
		return cli.ExitNo
	default:
		fmt.Fprintf(stdout, "campaign %s: written; no worker has taken it yet (shard %d under prefix %s): a worker creates it when it reads it\n",
			id, stream.CampaignShard(id, rf.shards), rf.prefix)
	}
	return cli.ExitOK
}

// addChunk is how many recipients one pipeline of `campaign add` writes.
const addChunk = 10_000

func cmdCampaignAdd(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.register(fs)
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	id := fs.Arg(0)
	if err := job.CheckCampaignID(id); err != nil {
		return fs.Fail(fmt.Errorf("ID: %w", err))
	}
	in, name, err := openInput(fs.Arg(1))
	if err != nil {
		return fs.Fail(err)
	}
	defer in.Close()
	recs, lines, err := cli.ReadRecipients(in, name)
	if err != nil {
		return fs.Fail(fmt.Errorf("%w; nothing written", err))
	}
	p, insp, closeRedis, code := rf.openWriter(fs, stderr)
	if p == nil {
		return code
	}
	defer closeRedis()
	written := 0
	for written < len(recs) {
		k, err := p.AddRecipients(ctx, id, recs[written:min(written+addChunk, len(recs))]...)
		if written += k; err != nil {
			fmt.Fprintf(stderr, "%s: stopped after %d recipients: %v\nrun again from line %d of %s\n", fs.Name(), written, err, lines[written], name)
			return redisExitCode(err)
		}
	}
	fmt.Fprintf(stdout, "added %d recipients to campaign %s from %s\n", written, id, name)
	if st, err := insp.Campaign(ctx, id, time.Now()); errors.Is(err, inspect.ErrNoCampaign) || (err == nil && !st.HasMessage) {
		fmt.Fprintf(stdout, "campaign %s is not created yet: its recipients wait for its create entry (`gateway-worker campaign create --id %s`)\n", id, id)
	}
	return cli.ExitOK
}

func cmdCampaignStatus(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print JSON (snake_case keys): one object, or for ls an array of them")
	insp, st, code := rf.openCampaign(ctx, fs, args, stdout, stderr)
	if insp == nil {
		return code
	}
	defer insp.Close()
	switch {
	case st != nil && *asJSON:
		return printJSON(fs, stdout, stderr, st)
	case st != nil:
		writeCampaignStatus(stdout, st, time.Now())
		return cli.ExitOK
	}
	list, err := insp.CampaignList(ctx, time.Now())
	switch {
	case err != nil:
		return unavailable(stderr, fs.Name(), err)
	case *asJSON:
		return printJSON(fs, stdout, stderr, list)
	case len(list) == 0:
		fmt.Fprintf(stdout, "no campaigns under prefix %s\n", rf.prefix)
	default:
		writeCampaignList(stdout, list)
	}
	return cli.ExitOK
}

// cmdCampaignState is `campaign pause`, `resume` or `cancel`: it sets the campaign's state.
func cmdCampaignState(state string) func(context.Context, *cli.FlagSet, []string, io.Writer, io.Writer) int {
	verb := map[string]string{stream.CampaignRunning: "resume", stream.CampaignPaused: "pause", stream.CampaignCanceled: "cancel"}[state]
	return func(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
		var rf redisFlags
		rf.registerReader(fs)
		insp, st, code := rf.openCampaign(ctx, fs, args, stdout, stderr)
		if insp == nil {
			return code
		}
		defer insp.Close()
		id := st.ID
		switch {
		case !st.HasMessage && state != stream.CampaignCanceled:
			fmt.Fprintf(stdout, "campaign %s is not created yet (its recipients wait for its create entry): nothing to %s\n", id, verb)
			return cli.ExitNo
		case st.State == stream.CampaignCanceled && state != stream.CampaignCanceled:
			fmt.Fprintf(stdout, "campaign %s is canceled: a canceled campaign cannot %s\n", id, verb)
			return cli.ExitNo
		}
		var n int64
		var err error
		if state == stream.CampaignCanceled {
			n, err = insp.CancelCampaign(ctx, id, time.Now())
		} else {
			err = insp.SetCampaignState(ctx, id, state)
		}
		if err != nil {
			return unavailable(stderr, fs.Name(), err)
		}
		switch state {
		case stream.CampaignPaused:
			fmt.Fprintf(stdout, "paused campaign %s: no more of its recipients enter the lanes, and the workers hold back unsent those in a lane, until `gateway-worker campaign resume %s`\n", id, id)
		case stream.CampaignRunning:
			fmt.Fprintf(stdout, "resumed campaign %s: its recipients enter the lanes again\n", id)
		default:
			fmt.Fprintf(stdout, "canceled campaign %s: %d queued recipients got their CANCELED records; the ones already in a lane get theirs when a worker reads them, and those in flight end with their own\n", id, n)
		}
		return cli.ExitOK
	}
}

// openCampaign parses a campaign command's flags and opens an Inspector as openReader does,
// with the status of the campaign its ID argument names (nil for `ls`, which takes none). On
// failure, a campaign that does not exist included, it has printed why and returns no
// Inspector and the exit code.
func (r *redisFlags) openCampaign(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) (*inspect.Inspector, *inspect.CampaignStatus, int) {
	if code, ok := fs.Parse(args); !ok {
		return nil, nil, code
	}
	id := fs.Arg(0)
	if err := job.CheckCampaignID(id); err != nil && fs.NArg() > 0 {
		return nil, nil, fs.Fail(fmt.Errorf("ID: %w", err))
	}
	insp, code := r.openReader(ctx, fs, "gateway-campaign", stderr)
	if insp == nil || id == "" {
		return insp, nil, code
	}
	st, err := insp.Campaign(ctx, id, time.Now())
	if err != nil {
		insp.Close()
		if errors.Is(err, inspect.ErrNoCampaign) {
			fmt.Fprintf(stdout, "no campaign %s under prefix %s\n", id, r.prefix)
			return nil, nil, cli.ExitNo
		}
		return nil, nil, unavailable(stderr, fs.Name(), err)
	}
	return insp, st, cli.ExitOK
}

// openWriter checks the flags and opens one client, with a Producer and an Inspector over it,
// for a command that writes campaign entries; the caller closes the client with the func it
// returns. On failure it has printed why and returns the exit code.
func (r *redisFlags) openWriter(fs *cli.FlagSet, stderr io.Writer) (*stream.Producer, *inspect.Inspector, func() error, int) {
	if err := r.check(); err != nil {
		return nil, nil, nil, fs.Fail(err)
	}
	o := stream.Options{Prefix: r.prefix, Shards: r.shards}
	rc, err := stream.OpenClient(r.url, stream.OpenOptions{Options: o, ClientName: "gateway-campaign"})
	if err != nil {
		return nil, nil, nil, failure(stderr, fs.Name(), cli.ExitUsage, fmt.Errorf("--redis: %w", err))
	}
	return stream.NewProducer(rc, r.prefix, r.shards), inspect.New(rc, o), rc.Close, cli.ExitOK
}
