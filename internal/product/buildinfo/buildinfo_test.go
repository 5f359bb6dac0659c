package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"release tag", "v1.2.3", nil, "v1.2.3"},
		{"pseudo-version from a checkout", "v0.0.0-20261129101500-abcdef123456+dirty", vcs("vcs.revision", "abcdef123456"), "v0.0.0-20261129101500-abcdef123456+dirty"},
		{"revision only", "(devel)", vcs("vcs", "git", "vcs.revision", "abcdef123456", "vcs.modified", "false"), "abcdef123456"},
		{"revision of a modified tree", "(devel)", vcs("vcs.revision", "abcdef123456", "vcs.modified", "true"), "abcdef123456-modified"},
		{"nothing known", "(devel)", vcs("GOOS", "linux"), "devel"},
		{"no version at all", "", nil, "devel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/webpush-gateway/webpush-gateway", Version: tc.version}, Settings: tc.settings}
			if got := fromBuildInfo(bi); got != tc.want {
				t.Errorf("fromBuildInfo = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := String("gateway-worker")
	want := "gateway-worker " + Version() + " (" + runtime.Version() + ")"
	if got != want || strings.Contains(got, "\n") || Version() == "" {
		t.Errorf("String = %q, want %q on one line", got, want)
	}
	if GoVersion() != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", GoVersion(), runtime.Version())
	}
}

// A version stamped at link time wins over whatever the build information says.
func TestStampWins(t *testing.T) {
	old := stamp
	t.Cleanup(func() { stamp = old })
	stamp = "v1.2.3-stamped"
	if got := Version(); got != "v1.2.3-stamped" {
		t.Errorf("Version = %q, want the stamp", got)
	}
	if got, want := String("gateway-worker"), "gateway-worker v1.2.3-stamped ("+runtime.Version()+")"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
