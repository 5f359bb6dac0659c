// Package buildinfo says which build of the gateway is running: the version the binary was
// stamped with (or the module version it was built from) and the Go release that built it.
// `gateway-worker version` prints it, `run` logs it when it starts, and the build-info metric
// (webpush_build_info) carries the same two strings.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// stamp is the version the build was given on the linker's command line:
//
//	go build -ldflags "-X github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo.stamp=v0.1.0"
//
// `make build`, `make image` and `make release` set it (the Makefile's VERSION: the git tag
// that describes HEAD, else the VERSION file). Empty when the build set nothing.
var stamp string

// Version is the version of this binary: the one stamped at link time when there is one;
// else the version of the main module it was built from: its module version (a release tag,
// or the pseudo-version the go command derives from the checkout's commit), else the VCS
// revision stamped into the build (with "-modified" when the work tree had uncommitted
// changes), else "devel".
func Version() string {
	if stamp != "" {
		return stamp
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(bi)
}

// GoVersion is the Go release that built this binary, as runtime.Version gives it ("go1.26.8").
func GoVersion() string { return runtime.Version() }

// String is the one line `version` prints: the program name, its version and the Go release.
func String(program string) string {
	return program + " " + Version() + " (" + GoVersion() + ")"
}

// fromBuildInfo is Version for a given build description.
func fromBuildInfo(bi *debug.BuildInfo) string {
	// "(devel)" is what the go command records when it knows no version for the main module.
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return "devel"
	}
	if modified {
		return revision + "-modified"
	}
	return revision
}
