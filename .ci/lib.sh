#!/usr/bin/env bash
# Shared set-up steps for .ci/serve and .ci/test. Each step is idempotent: it does nothing
# when its part is already in place, so running the commands twice is cheap.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${AB_VENV:-$ROOT/.venv}
PY=$VENV/bin/python

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root (or sudo) for: $*" >&2; return 1; fi
}

# Debian packages the whole test suite needs: real engines, not mocks.
# docker-compose: tests/benchsite/test_deploy_compose.py runs docker/compose.yaml.
# docker-registry, apache2-utils (htpasswd): tests/support/registry_fixtures.py serves images
# on loopback.
# gcc, libc6-dev: the model gateway's forwarder, a static binary built from sandbox/.
# golang-go, php-cli, phpunit, ruby, ruby-minitest, ruby-test-unit: tests/tasks_app/swebench/test_swebench_languages.py
# runs the cheap SWE-bench Multilingual test runners live (Go, PHP, Ruby).
SYSTEM_PACKAGES=(git ripgrep bubblewrap docker.io debootstrap redis-server postgresql
                 docker-registry apache2-utils skopeo umoci
                 chromium chromium-driver procps iproute2 slirp4netns iptables docker-compose
                 e2fsprogs util-linux mount gcc libc6-dev
                 golang-go php-cli phpunit ruby ruby-minitest ruby-test-unit)

ensure_system_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_venv() {
  local extras=${1:-dev}
  if [ ! -x "$PY" ]; then
    log "creating virtualenv $VENV"
    python3 -m venv "$VENV"
  fi
  local stamp=$VENV/.installed-$extras
  if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
    log "installing Python dependencies ($extras)"
    "$PY" -m pip install -q --upgrade pip >/dev/null
    "$PY" -m pip install -q -e "$ROOT[$extras]"
    touch "$stamp"
  fi
}

start_dockerd() {
  if docker info >/dev/null 2>&1; then return 0; fi
  command -v dockerd >/dev/null || { echo "dockerd not installed" >&2; return 1; }
  log "starting dockerd"
  mkdir -p /var/log
  # Its own session: the engine must outlive the shell (or test) that happened to start it.
  as_root sh -c 'setsid nohup dockerd >/var/log/agentbench-dockerd.log 2>&1 < /dev/null &'
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && return 0; sleep 1; done
  echo "dockerd did not come up; see /var/log/agentbench-dockerd.log" >&2
  tail -20 /var/log/agentbench-dockerd.log >&2 || true
  return 1
}

build_runner_image() {
  # The script itself checks the image and the bubblewrap rootfs against its recipe hash and
  # rebuilds only what is missing or stale (a no-op run takes well under a second).
  local image=${SANDBOX_IMAGE:-agentbench/py-runner:0.1.0}
  local rootfs=${SANDBOX_BWRAP_ROOTFS:-/var/lib/agentbench/rootfs/py-runner}
  as_root env SANDBOX_BWRAP_ROOTFS="$rootfs" bash "$ROOT/docker/py-runner/build-offline.sh" "$image"
}

start_redis() {
  if redis-cli -p "${AB_REDIS_PORT:-6379}" ping >/dev/null 2>&1; then return 0; fi
  log "starting redis-server"
  redis-server --port "${AB_REDIS_PORT:-6379}" --bind 127.0.0.1 --daemonize yes \
    --save "" --appendonly no >/dev/null
  for _ in $(seq 1 30); do redis-cli -p "${AB_REDIS_PORT:-6379}" ping >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

start_postgres() {
  local version
  version=$(ls /usr/lib/postgresql | sort -n | tail -1)
  local bin=/usr/lib/postgresql/$version/bin
  local data=${AB_PGDATA:-/var/lib/agentbench-pg}
  local port=${AB_PG_PORT:-5432}
  if pg_isready -h 127.0.0.1 -p "$port" >/dev/null 2>&1; then return 0; fi
  log "starting PostgreSQL $version on port $port"
  if [ ! -f "$data/PG_VERSION" ]; then
    as_root mkdir -p "$data"
    as_root chown postgres:postgres "$data"
    as_root su postgres -c "$bin/initdb -D $data -U postgres --auth=trust >/dev/null"
  fi
  as_root mkdir -p /var/run/postgresql
  as_root chown postgres:postgres /var/run/postgresql
  as_root su postgres -c "$bin/pg_ctl -D $data -o '-p $port -c listen_addresses=127.0.0.1' -l $data/server.log -w start >/dev/null"
}
