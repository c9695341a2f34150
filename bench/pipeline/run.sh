#!/usr/bin/env bash
# Measures decree's per-message overhead: a chain of N trivial messages
# (each routine queues the next one and exits 0) on a project of FILES
# files, through the built decreectl, against running the same routine N
# times with bash directly in the same run. Also prints decreectl's peak RSS
# for the chain and for one a quarter as long (flat memory: close values).
#
#   bench/pipeline/run.sh [N] [FILES] [RUNS]
#
# Goal (issue 5): at most 20 ms of overhead per message.
set -euo pipefail
N=${1:-200}
FILES=${2:-1000}
RUNS=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-pipebench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/" ./cmd/decreectl ./bench/pipeline)
"$tmp/pipeline" -decreectl "$tmp/decreectl" -n "$N" -files "$FILES" -runs "$RUNS"
