#!/usr/bin/env bash
# Installs what `make test` and `make demo` need beyond Go: redis-server, from Debian's packages,
# when it is not on the PATH. Tests start their own redis-server processes on free ports, so the
# packaged service is stopped again after the install.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps: ${missing[*]} missing and not root; install it with your package manager" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: ${missing[*]} missing and no apt-get here; install it with your package manager" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]} from Debian's packages" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
if command -v systemctl >/dev/null 2>&1; then $sudo systemctl stop redis-server >/dev/null 2>&1 || true; fi
command -v redis-server >/dev/null
