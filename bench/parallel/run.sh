#!/usr/bin/env bash
# Measures parallel chains (issue 26): 8 independent chains of 3 messages,
# each routine sleeping 2 s and editing its chain's own file, on 1, 2, 4
# and 8 replica workers (separate decree-controller and decree-worker
# processes, parallel: <workers>), in interleaved rounds. Prints the wall
# time against the ideal (messages x 2 s / min(workers, chains)), the
# ratio, the merge overhead per chain (last message_done to chain_merged)
# and the load average; then a conflict scenario (two chains change one
# line: the second conflicts, is requeued, and merges).
#
#   bench/parallel/run.sh [-workers 1,2,4,8] [-rounds 2] [-chains 8] [-len 3] [-sleep 2s]
#
# Goal (issue 26): within 15% of the ideal at 4 workers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-parbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/" ./cmd/decree-controller ./cmd/decree-worker ./cmd/decree-supervisor ./bench/parallel)
"$tmp/parallel" -bin "$tmp" "$@"
