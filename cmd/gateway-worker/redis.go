package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// redisFlags are the flags every command that talks to Redis shares.
type redisFlags struct {
	url    string
	prefix string
	shards int
	// reader: the command only reads, and --shards defaults to the recorded count.
	reader bool
}

const redisURLHelp = "Redis `URL`: redis://, rediss://, unix://, redis+sentinel://h:p,h:p/master, redis+cluster://h:p,h:p (docs/operations.md)"

// register defines --redis (required), --prefix and --shards under "Redis", for a command that
// writes (run, enqueue): its shard count is given, and recorded by the first to use the prefix.
func (r *redisFlags) register(fs *cli.FlagSet) {
	fs.Group("Redis")
	fs.StringVar(&r.url, "redis", "", redisURLHelp)
	fs.StringVar(&r.prefix, "prefix", stream.DefaultPrefix, "key `PREFIX` of every key")
	fs.IntVar(&r.shards, "shards", 1, "`N` shards; every worker and producer of a prefix must agree")
	fs.Require("redis")
}

// registerReader is register for a command that only reads Redis: --shards defaults to the
// count recorded for the prefix.
func (r *redisFlags) registerReader(fs *cli.FlagSet) {
	r.reader = true
	fs.Group("Redis")
	fs.StringVar(&r.url, "redis", "", redisURLHelp)
	fs.StringVar(&r.prefix, "prefix", stream.DefaultPrefix, "key `PREFIX` of every key")
	fs.IntVar(&r.shards, "shards", 0, "`N` shards (default: the count recorded for the prefix, else 1)")
	fs.Require("redis")
}

func (r *redisFlags) check() error {
	switch {
	case r.reader && (r.shards < 0 || r.shards > stream.MaxShards):
		return fmt.Errorf("--shards must be 1 to %d (or left out for the recorded count), got %d", stream.MaxShards, r.shards)
	case !r.reader && (r.shards < 1 || r.shards > stream.MaxShards):
		return fmt.Errorf("--shards must be 1 to %d, got %d", stream.MaxShards, r.shards)
	}
	if err := stream.CheckPrefix(r.prefix); err != nil {
		return fmt.Errorf("--prefix: %w", err)
	}
	return nil
}

// openReader checks the flags and opens a Store for a command that reads Redis only (no
// consumer name, nothing recorded). Without --shards it takes the count recorded for the
// prefix (1 when none is); a count given that differs from the recorded one is refused. On
// failure it has printed why and returns the exit code: ExitUsage for a flag, URL or shard
// count refused, ExitUnavailable for a Redis that could not be read.
func (r *redisFlags) openReader(ctx context.Context, fs *cli.FlagSet, client string, stderr io.Writer) (*stream.Store, int) {
	if err := r.check(); err != nil {
		return nil, fs.Fail(err)
	}
	name := fs.Name()
	open := func(shards int) (*stream.Store, error) {
		return stream.Open(r.url, stream.OpenOptions{
			Options: stream.Options{Prefix: r.prefix, Shards: shards}, ClientName: client,
		})
	}
	st, err := open(max(r.shards, 1))
	if err != nil {
		return nil, failure(stderr, name, cli.ExitUsage, fmt.Errorf("--redis: %w", err))
	}
	if r.shards > 0 {
		if err := st.VerifyShards(ctx); err != nil {
			st.Close()
			if errors.Is(err, stream.ErrShardCount) {
				return nil, failure(stderr, name, cli.ExitUsage, err)
			}
			return nil, unavailable(stderr, name, err)
		}
		return st, cli.ExitOK
	}
	n, err := st.RecordedShards(ctx)
	if err != nil {
		st.Close()
		return nil, unavailable(stderr, name, err)
	}
	if n <= 1 {
		return st, cli.ExitOK
	}
	st.Close()
	if st, err = open(n); err != nil {
		return nil, failure(stderr, name, cli.ExitUsage, fmt.Errorf("--redis: %w", err))
	}
	return st, cli.ExitOK
}

// failure prints "name: err" and returns code.
func failure(stderr io.Writer, name string, code int, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return code
}

// unavailable reports a Redis that could not be read or written: ExitUnavailable.
func unavailable(stderr io.Writer, name string, err error) int {
	return failure(stderr, name, cli.ExitUnavailable, fmt.Errorf("could not read or write Redis: %w", err))
}
