#!/usr/bin/env bash
# Installs what the tests of examples/ (the Python and Node producers and consumers) need, when
# it is missing:
#   * redis-py for python3, from Debian's python3-redis. It installs for Debian's /usr/bin/python3;
#     the tests use the python3 on the PATH when it has redis-py, else that one.
#   * node and npm, from Debian's nodejs and npm, when node is not on the PATH.
#   * examples/node's packages (ioredis), with `npm ci` from its package-lock.json, when
#     examples/node/node_modules has no ioredis.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

have_redis_py=0
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import redis' >/dev/null 2>&1; then
    have_redis_py=1
    break
  fi
done
missing=()
[ "$have_redis_py" -eq 1 ] || missing+=(python3-redis)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "install-example-deps: ${missing[*]} missing and not root; install it with your package manager" >&2
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-example-deps: ${missing[*]} missing and no apt-get here; install it with your package manager" >&2
    exit 1
  fi
  echo "install-example-deps: installing ${missing[*]} from Debian's packages" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "$root/examples/node/node_modules/ioredis/package.json" ]; then
  echo "install-example-deps: npm ci --prefix examples/node" >&2
  npm ci --prefix "$root/examples/node" --no-audit --no-fund >/dev/null
fi
