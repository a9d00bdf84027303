#!/usr/bin/env bash
# Build the image of docker/compose.yaml with no container registry:
#   1. a base image: debootstrap a minimal Debian bookworm (Python, git, PostgreSQL, Redis) from
#      the mirror this machine's apt uses, then `docker import` it;
#   2. wheels of every Python dependency, fetched by this host's pip (its index and proxy);
#   3. `docker build --network none` FROM the base, installing the wheels and the project's
#      files (git ls-files) at /app.
#
#   bash docker/app/build-offline.sh        (as root; prints the image name on its last line)
#
# Each step is cached under $AB_BUILD_CACHE (default /var/lib/agentbench/compose), keyed by the
# hash of what it is built from: a second run with nothing changed takes a few seconds.
# The image is tagged agentbench/app:<content hash> and agentbench/app:local.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${AB_BUILD_CACHE:-/var/lib/agentbench/compose}
SUITE=bookworm
PACKAGES=python3,python3-pip,git,ca-certificates,postgresql,redis-server,procps
RECIPE_VERSION=1
# The python3 of Debian bookworm, which the base image gets.
IMAGE_PYTHON=3.11.2

log() { printf '== %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { echo "build-offline.sh must run as root (debootstrap, docker)" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "no Docker engine answers" >&2; exit 1; }
mkdir -p "$CACHE"

# The Debian mirror apt is configured with (as docker/py-runner/build-offline.sh finds it).
debian_mirror() {
  local uri
  uri=$(awk '
    /^URIs:/ { uris = $2 } /^Suites:/ { suites = $0 }
    /^$/ { if (suites ~ /(^| )'"$SUITE"'( |$)/ && uris != "") { print uris; exit } uris = ""; suites = "" }
    END { if (suites ~ /(^| )'"$SUITE"'( |$)/ && uris != "") print uris }
  ' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $3 == "'"$SUITE"'" { print $2; exit }' /etc/apt/sources.list)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

BASE_KEY=$(printf '%s|%s|%s' "$SUITE" "$PACKAGES" "$RECIPE_VERSION" | sha256sum | cut -c1-16)
BASE_IMAGE=agentbench/app-base:$BASE_KEY

build_base() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base image $BASE_IMAGE is up to date"
    return 0
  fi
  local work
  work=$(mktemp -d "$CACHE/base.build.XXXXXX")
  trap 'rm -rf "$work" "$work.log"' EXIT
  log "debootstrap $SUITE (+ $PACKAGES) into $work (a few minutes)"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work" "$(debian_mirror)" \
    >"$work.log" 2>&1 || { tail -30 "$work.log" >&2; exit 1; }
  chroot "$work" apt-get clean
  rm -rf "$work"/var/lib/apt/lists/* "$work"/var/cache/apt/*.bin "$work"/var/log/*.log
  # The package's own cluster is not used: postgres.sh initializes one in the data volume.
  rm -rf "$work"/var/lib/postgresql/* "$work"/etc/postgresql/*
  : >"$work/etc/resolv.conf"
  log "importing $BASE_IMAGE"
  tar --numeric-owner -C "$work" -c . | docker import \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LANG=C.UTF-8" \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$work" "$work.log"
  trap - EXIT
}

# The runtime dependencies of pyproject.toml, one per line, plus what their environment
# markers add on the image's Python but not on this host's (pip download evaluates markers
# with the running interpreter): redis needs async-timeout below Python 3.11.3.
requirements() {
  python3 - "$ROOT/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
PY
  echo "async-timeout>=4.0.3"
}

build_wheels() {
  local key=$1 dir=$CACHE/wheels-$1
  if [ -f "$dir/.complete" ]; then
    log "wheels $dir are up to date"
    echo "$dir"
    return 0
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  log "fetching wheels into $dir"
  local pip=${AB_PIP:-$ROOT/.venv/bin/pip}
  [ -x "$pip" ] || pip=pip3
  # Binary wheels for the image's Python and platform, never built on this host.
  "$pip" download -q --only-binary=:all: --python-version "$IMAGE_PYTHON" --implementation cp \
    --abi cp311 --abi abi3 --abi none --platform manylinux_2_36_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform linux_x86_64 \
    --dest "$dir" -r "$CACHE/requirements-$key.txt" \
    >"$dir.log" 2>&1 || { grep -v "is ignored: it is neither" "$dir.log" | tail -30 >&2; exit 1; }
  rm -f "$dir.log"
  touch "$dir/.complete"
  echo "$dir"
}

build_base
requirements >"$CACHE/requirements.tmp"
REQ_KEY=$(sha256sum "$CACHE/requirements.tmp" | cut -c1-16)
mv "$CACHE/requirements.tmp" "$CACHE/requirements-$REQ_KEY.txt"
WHEELS=$(build_wheels "$REQ_KEY")

# The image's key: the base, the wheels and every file git tracks (content, not mtime).
SRC_KEY=$(cd "$ROOT" && git ls-files -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
APP_KEY=$(printf '%s|%s|%s' "$BASE_KEY" "$REQ_KEY" "$SRC_KEY" | sha256sum | cut -c1-16)
IMAGE=agentbench/app:$APP_KEY
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "image $IMAGE is up to date"
else
  ctx=$(mktemp -d "$CACHE/context.XXXXXX")
  trap 'rm -rf "$ctx"' EXIT
  cp "$ROOT/docker/app/Dockerfile" "$ctx/"
  cp "$CACHE/requirements-$REQ_KEY.txt" "$ctx/requirements.txt"
  cp -al "$WHEELS" "$ctx/wheels" 2>/dev/null || cp -a "$WHEELS" "$ctx/wheels"
  mkdir "$ctx/src"
  (cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$ctx/src")
  log "building $IMAGE (no network)"
  docker build -q --network none --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
  trap - EXIT
fi
docker tag "$IMAGE" agentbench/app:local
# Older builds of the app (another source tree) only take disk: their layers below the
# project's files are shared with this one anyway.
for old in $(docker images agentbench/app --format '{{.Tag}}'); do
  case $old in local|"$APP_KEY") ;; *) docker rmi "agentbench/app:$old" >/dev/null 2>&1 || true ;; esac
done
echo "$IMAGE"
