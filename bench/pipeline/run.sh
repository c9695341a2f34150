#!/usr/bin/env bash
# Measures decree's per-message overhead: a chain of N trivial messages
# (each routine queues the next one and exits 0) on a project of FILES
# files, through the built decreectl, against running the same routine N
# times with bash directly in the same run. Also prints decreectl's peak RSS
# for the chain and for one a quarter as long (flat memory: close values).
#
#   bench/pipeline/run.sh [N] [FILES] [RUNS] [QUEUED]
#
# QUEUED messages of other chains wait in the inbox all along (default 0).
# RALPH=1 also times the ralph loop (bash routine.sh && git add -A && git
# commit -q per message) on a committed copy of the tree, interleaved, and
# prints decree's time over it (goal: <= 1.0 at 1,000 files, <= 0.5 at
# 10,000 and 50,000).
# Goal: at most 10 ms of overhead per message at 1,000 files, whatever the
# number queued.
set -euo pipefail
N=${1:-200}
FILES=${2:-1000}
RUNS=${3:-3}
QUEUED=${4:-0}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-pipebench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# decree-supervisor beside decreectl, as `make build` installs them.
(cd "$repo" && go build -o "$tmp/" ./cmd/decreectl ./cmd/decree-supervisor ./bench/pipeline)
"$tmp/pipeline" -decreectl "$tmp/decreectl" -n "$N" -files "$FILES" -runs "$RUNS" -queued "$QUEUED" ${RALPH:+-ralph}
