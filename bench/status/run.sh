#!/usr/bin/env bash
# Times `decreectl status` with no controller running, 1 message queued
# against QUEUED (default 10,000), interleaved. Goal: flat (ratio near 1).
#
#   bench/status/run.sh [QUEUED] [RUNS]
set -euo pipefail
QUEUED=${1:-10000}
RUNS=${2:-7}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-statusbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/" ./cmd/decreectl ./cmd/decree-supervisor ./bench/status)
"$tmp/status" -decreectl "$tmp/decreectl" -queued "$QUEUED" -runs "$RUNS"
