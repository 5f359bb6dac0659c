package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// redisFlags are the flags every command that talks to Redis shares.
type redisFlags struct {
	url    string
	prefix string
	shards int
	// reader: the command only reads, and --shards defaults to the recorded count.
	reader bool
	// registry is --registry, for the commands that read the provider table beside Redis
	// (registerRegistry).
	registry string
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

// registerRegistry defines --registry under heading, for a command that reads the provider table
// beside Redis (openWithRegistry); usage says what the command takes from it.
func (r *redisFlags) registerRegistry(fs *cli.FlagSet, heading, usage string) {
	fs.Group(heading)
	fs.StringVar(&r.registry, "registry", "", "provider table `FILE` "+usage+" (default: the built-in registry.yaml)")
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

// openReader checks the flags and opens an Inspector for a command that reads Redis only (no
// consumer name, nothing recorded). Without --shards it takes the count recorded for the
// prefix (1 when none is); a count given that differs from the recorded one is refused. On
// failure it has printed why and returns the exit code: ExitUsage for a flag, URL or shard
// count refused, ExitUnavailable for a Redis that could not be read.
func (r *redisFlags) openReader(ctx context.Context, fs *cli.FlagSet, client string, stderr io.Writer) (*inspect.Inspector, int) {
	if err := r.check(); err != nil {
		return nil, fs.Fail(err)
	}
	name := fs.Name()
	open := func(shards int) (*inspect.Inspector, error) {
		return inspect.Open(r.url, stream.OpenOptions{
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
			return nil, redisFailure(stderr, name, err)
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

// openWithRegistry loads the provider table of --registry, then opens an Inspector as openReader
// does. On failure it has printed why and returns the exit code: ExitUsage for a table that
// cannot be loaded, else openReader's.
func (r *redisFlags) openWithRegistry(ctx context.Context, fs *cli.FlagSet, client string, stderr io.Writer) (*inspect.Inspector, *providers.Registry, int) {
	reg, err := cli.LoadRegistry(r.registry)
	if err != nil {
		return nil, nil, fs.Fail(fmt.Errorf("--registry: %w", err))
	}
	st, code := r.openReader(ctx, fs, client, stderr)
	return st, reg, code
}

// printJSON writes v to stdout as one JSON object: ExitOK, or ExitNo when stdout cannot be
// written.
func printJSON(fs *cli.FlagSet, stdout, stderr io.Writer, v any) int {
	if err := json.NewEncoder(stdout).Encode(v); err != nil {
		return failure(stderr, fs.Name(), cli.ExitNo, err)
	}
	return cli.ExitOK
}

// failure prints "name: err" and returns code.
func failure(stderr io.Writer, name string, code int, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return code
}

// redisExitCode is the exit code of a command that reading or writing Redis failed with err:
// ExitUsage when the shard count given is not the one recorded for the prefix (the flag is
// wrong, not Redis), else ExitUnavailable.
func redisExitCode(err error) int {
	if errors.Is(err, stream.ErrShardCount) {
		return cli.ExitUsage
	}
	return cli.ExitUnavailable
}

// redisFailure reports err, of reading or writing Redis, and returns its redisExitCode.
func redisFailure(stderr io.Writer, name string, err error) int {
	if code := redisExitCode(err); code != cli.ExitUnavailable {
		return failure(stderr, name, code, err)
	}
	return unavailable(stderr, name, err)
}

// unavailable reports a Redis that could not be read or written: ExitUnavailable.
func unavailable(stderr io.Writer, name string, err error) int {
	return failure(stderr, name, cli.ExitUnavailable, fmt.Errorf("could not read or write Redis: %w", err))
}
