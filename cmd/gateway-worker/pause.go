package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

func cmdPause(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	fs.Group("Pause")
	reason := fs.String("reason", "", "why, for whoever reads `status` (`TEXT`)")
	rf.registerRegistry(fs, "Delivery", "that lists the provider (one it does not list is refused unless a lane of it exists)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	provider := fs.Arg(0)
	if err := checkPauseRequest(provider, *reason); err != nil {
		return fs.Fail(err)
	}
	st, reg, code := rf.openWithRegistry(ctx, fs, "gateway-pause", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	if _, ok := reg.Provider(provider); !ok {
		has, err := st.HasLane(ctx, provider)
		if err != nil {
			return unavailable(stderr, fs.Name(), err)
		}
		if !has {
			// A typo would otherwise pause nothing and say so only in passing; a lane of it under
			// the prefix says a fleet with another table serves it, and the pause goes ahead.
			return fs.Fail(fmt.Errorf("%q is not a provider of %s and no lane of it exists under prefix %s (a typo?); the providers are %s (a fleet with another table: give it with --registry FILE)",
				provider, registryName(rf.registry), rf.prefix, strings.Join(reg.IDs(), ", ")))
		}
	}
	p := inspect.Pause{Provider: provider, Reason: *reason, By: operator(), At: time.Now().UTC()}
	if err := st.PauseProvider(ctx, p); err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	fmt.Fprintf(stdout, "paused %s under prefix %s: every worker's lanes of it stop reading at their next heartbeat; its jobs wait in Redis. `gateway-worker resume %s` ends it.\n",
		provider, rf.prefix, provider)
	return cli.ExitOK
}

func cmdResume(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	provider := fs.Arg(0)
	if err := checkProviderID(provider); err != nil {
		return fs.Fail(err)
	}
	st, code := rf.openReader(ctx, fs, "gateway-pause", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	was, err := st.ResumeProvider(ctx, provider)
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	if !was {
		fmt.Fprintf(stdout, "%s was not paused under prefix %s; nothing changed\n", provider, rf.prefix)
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "resumed %s under prefix %s: its lanes read again at every worker's next heartbeat\n", provider, rf.prefix)
	return cli.ExitOK
}

// registryName is how messages name the registry of --registry path.
func registryName(path string) string {
	if path == "" {
		return cli.BuiltinRegistryName
	}
	return path
}

// operator names who paused, for status: the user and the host.
func operator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "":
		return host
	case host == "":
		return name
	}
	return name + "@" + host
}
