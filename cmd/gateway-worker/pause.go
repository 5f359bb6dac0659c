package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

func cmdPause(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	fs.Group("Pause")
	reason := fs.String("reason", "", "why, for whoever reads `status` (`TEXT`)")
	rf.registerRegistry(fs, "Delivery", "the provider should be in; a warning says when it is not")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	provider := fs.Arg(0)
	if err := checkProviderID(provider); err != nil {
		return fs.Fail(err)
	}
	if err := checkReason(*reason); err != nil {
		return fs.Fail(err)
	}
	st, reg, code := rf.openWithRegistry(ctx, fs, "gateway-pause", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	if _, ok := reg.Provider(provider); !ok {
		lanes, err := st.AllLanes(ctx)
		if err != nil {
			return unavailable(stderr, fs.Name(), err)
		}
		if !hasLane(lanes, provider) {
			fmt.Fprintf(stderr, "%s: warning: %q is not in %s and no lane of it exists under prefix %s (a typo?); paused anyway: workers whose registry lists it will honour it\n",
				fs.Name(), provider, registryName(rf.registry), rf.prefix)
		}
	}
	p := stream.Pause{Provider: provider, Reason: *reason, By: operator(), At: time.Now().UTC()}
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

// checkProviderID refuses what no registry id can be: empty, or holding spaces or control
// characters.
func checkProviderID(id string) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("PROVIDER is empty: give a provider id of the registry (fcm, autopush, apple, wns, fallback, ...)")
	}
	if strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("PROVIDER %q is not a provider id: ids hold no spaces or control characters", id)
	}
	return nil
}

// maxReason bounds --reason: status prints it on one line of a table.
const maxReason = 500

// checkReason refuses a --reason that status could not print as the one line it is: anything
// but printable characters (a newline or an escape sequence would forge or garble the lines
// after it, a bidirectional override would reorder them), text that is not UTF-8, and more
// than maxReason bytes.
func checkReason(reason string) error {
	if !utf8.ValidString(reason) {
		return fmt.Errorf("--reason %q is not valid UTF-8: give one line of plain text", reason)
	}
	for i, r := range reason {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("--reason holds a control or format character (%q at byte %d): give one line of plain text", r, i)
		}
	}
	if len(reason) > maxReason {
		return fmt.Errorf("--reason is %d bytes long: at most %d", len(reason), maxReason)
	}
	return nil
}

func hasLane(lanes map[int][]string, provider string) bool {
	for _, ps := range lanes {
		for _, p := range ps {
			if p == provider {
				return true
			}
		}
	}
	return false
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
