#!/usr/bin/env bash
# Installs what `make test` and `make demo` need beyond Go, from Debian's packages, when it is
# missing:
#   * redis-server (and redis-cli, from redis-tools), when it is not on the PATH. Tests start
#     their own redis-server processes on free ports, so the packaged service is stopped again
#     after the install.
#   * tinyproxy, when it is not on the PATH: the adapter's tests send through a real HTTP CONNECT
#     proxy. The tests start their own tinyproxy on a free port, so the packaged service is
#     stopped (and kept from starting at boot) after the install.
#   * promtool (Prometheus's rule checker, for the deploy/ tests), when it is neither on the PATH
#     nor at bin/promtool. Only that one binary is taken out of Debian's prometheus package
#     (apt-get download + dpkg-deb), into bin/promtool: installing the package would also bring a
#     Prometheus server and its service.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
promtool_local="$root/bin/promtool"

# cosign, which `make release` signs with and deploy/release's test verifies with, comes from the
# Go module proxy; building it takes minutes on two cores, so it is built here, once, into the Go
# build cache (`go run` keeps the executable there), rather than inside a test's time limit. The
# version is deploy/release's CosignPackage; a test keeps the two the same.
if command -v go >/dev/null 2>&1; then
  go run github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5 version >/dev/null 2>&1 ||
    echo "install-deps: cosign did not build; deploy/release's test will build it" >&2
fi

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# test/cluster builds its clusters with redis-cli (Debian's redis-tools, which redis-server
# depends on; a redis-server from elsewhere may come without it).
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v tinyproxy >/dev/null 2>&1 || missing+=(tinyproxy)
need_promtool=0
if ! command -v promtool >/dev/null 2>&1 && [ ! -x "$promtool_local" ]; then need_promtool=1; fi
[ ${#missing[@]} -eq 0 ] && [ "$need_promtool" -eq 0 ] && exit 0

what="${missing[*]}"
[ "$need_promtool" -eq 1 ] && what="${what:+$what }promtool"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps: $what missing and not root; install it with your package manager" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: $what missing and no apt-get here; install it with your package manager" >&2
  exit 1
fi
echo "install-deps: installing $what from Debian's packages" >&2
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  if command -v systemctl >/dev/null 2>&1; then
    $sudo systemctl stop redis-server >/dev/null 2>&1 || true
    $sudo systemctl disable --now tinyproxy >/dev/null 2>&1 || true
  fi
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v tinyproxy >/dev/null
fi
if [ "$need_promtool" -eq 1 ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  # As root, apt would hand the download to its unprivileged _apt user, who cannot write here.
  sandbox=()
  [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
  (cd "$tmp" && apt-get download -qq "${sandbox[@]}" prometheus >/dev/null)
  dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
  mkdir -p "$root/bin"
  install -m 0755 "$tmp/usr/bin/promtool" "$promtool_local"
  "$promtool_local" --version >/dev/null
  echo "install-deps: promtool at bin/promtool ($("$promtool_local" --version 2>&1 | head -1))" >&2
fi
