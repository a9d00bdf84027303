#!/usr/bin/env bash
# Build the runner image with no container registry: debootstrap a minimal Debian bookworm from
# the mirror this machine's apt already uses, add the same packages and user as the Dockerfile,
# then `docker import` it. The extracted root filesystem stays at $SANDBOX_BWRAP_ROOTFS so the
# bubblewrap backend runs the very same tools.
#
#   bash docker/py-runner/build-offline.sh [IMAGE]     (as root; about two minutes the first time)
#
# Idempotent: a recipe hash (suite, packages, user, RECIPE_VERSION) is stamped into the rootfs
# and the image label, so a second run with nothing changed does nothing, and a change to the
# recipe rebuilds both. Bump RECIPE_VERSION when changing the build steps themselves.
set -euo pipefail

IMAGE=${1:-${SANDBOX_IMAGE:-agentbench/py-runner:0.1.0}}
ROOTFS=${SANDBOX_BWRAP_ROOTFS:-/var/lib/agentbench/rootfs/py-runner}
SUITE=bookworm
# Keep in step with the Dockerfile next to this script.
PACKAGES=python3,python3-pytest,python3-pip,python-is-python3,git,ripgrep,ca-certificates,patch
AGENT_UID=1000

log() { printf '== %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { echo "build-offline.sh must run as root (debootstrap, chroot)" >&2; exit 1; }

RECIPE_VERSION=1
RECIPE=$(printf '%s|%s|%s|%s' "$SUITE" "$PACKAGES" "$AGENT_UID" "$RECIPE_VERSION" | sha256sum | cut -c1-16)
STAMP=etc/agentbench-rootfs-recipe

# The Debian mirror apt is configured with (deb822 .sources first, then sources.list lines).
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

build_rootfs() {
  if [ "$(cat "$ROOTFS/$STAMP" 2>/dev/null)" = "$RECIPE" ]; then
    log "rootfs $ROOTFS is up to date"
    return 0
  fi
  local mirror work
  mirror=$(debian_mirror)
  mkdir -p "$(dirname "$ROOTFS")"
  # Build beside the target and swap at the end: a half-built rootfs is never used.
  work=$(mktemp -d "$ROOTFS.build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "debootstrap $SUITE from $mirror into $work"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work" "$mirror" >"$work.log" 2>&1 || {
    tail -30 "$work.log" >&2; rm -f "$work.log"; exit 1; }
  rm -f "$work.log"
  chroot "$work" useradd --uid "$AGENT_UID" --user-group --create-home --shell /bin/bash agent
  mkdir -p "$work/workspace"
  chown "$AGENT_UID:$AGENT_UID" "$work/workspace"
  # Docker and bubblewrap mount their own resolv.conf/hosts over these; they stay as mount points.
  : >"$work/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$work/etc/hosts"
  echo sandbox >"$work/etc/hostname"
  chroot "$work" apt-get clean
  rm -rf "$work"/var/lib/apt/lists/* "$work"/var/cache/apt/*.bin "$work"/var/log/*.log \
    "$work"/var/cache/debconf/*-old
  chmod 755 "$work"
  echo "$RECIPE" >"$work/$STAMP"
  # Swap with two renames, so the path is missing for an instant only, never half-written.
  if [ -e "$ROOTFS" ]; then mv "$ROOTFS" "$work.old"; fi
  mv "$work" "$ROOTFS"
  rm -rf "$work.old"
  trap - EXIT
  log "rootfs ready at $ROOTFS ($(du -sh "$ROOTFS" | cut -f1))"
}

import_image() {
  if ! docker info >/dev/null 2>&1; then
    log "no Docker engine answers: rootfs only, image $IMAGE not imported"
    return 0
  fi
  local have
  have=$(docker image inspect --format '{{ index .Config.Labels "agentbench.recipe" }}' "$IMAGE" 2>/dev/null || true)
  if [ "$have" = "$RECIPE" ]; then
    log "image $IMAGE is up to date"
    return 0
  fi
  log "importing $IMAGE"
  tar --numeric-owner --exclude="./$STAMP" -C "$ROOTFS" -c . | docker import \
    --change "USER agent" \
    --change "WORKDIR /workspace" \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LANG=C.UTF-8" \
    --change "LABEL agentbench.recipe=$RECIPE" \
    --change 'CMD ["bash"]' \
    - "$IMAGE" >/dev/null
  log "image $IMAGE ready"
}

build_rootfs
import_image
