#!/usr/bin/env bash
# Build examples/toy_repo.bundle, a git bundle of examples/toy_repo/ with a fixed author and
# date, so the commit id pinned in tasks/custom-dev/*/task.yaml is the same on every machine.
# Usage: bash examples/make_toy_bundle.sh [OUT]   (prints the commit id)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/toy_repo.bundle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here/toy_repo/." "$work/"
cd "$work"
export GIT_AUTHOR_NAME="AgentBench" GIT_AUTHOR_EMAIL="examples@agentbench.invalid"
export GIT_COMMITTER_NAME="AgentBench" GIT_COMMITTER_EMAIL="examples@agentbench.invalid"
export GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z"
git init -q -b main .
git -c core.autocrlf=false add -A
git -c commit.gpgsign=false commit -q -m "toy repo: mean() truncates"
git bundle create -q "$out" HEAD main
git rev-parse HEAD
