#!/usr/bin/env bash
# Measures how the per-message cost depends on the queue length: with 1,
# 1,000 and 10,000 messages queued on a project of FILES files, a separate
# decree-controller and decree-worker process the first K; the same
# routine run K times by bash is the reference. 20 clients poll status
# meanwhile (p50/p95 reported); the controller's peak RSS is printed.
#
#   bench/queue/run.sh [K] [FILES] [QUEUES]
#
# Goal (issue 11): at most 10 ms of overhead per message at 1,000 files,
# flat in the queue length; flat RSS; status p50 under 50 ms.
set -euo pipefail
K=${1:-100}
FILES=${2:-1000}
QUEUES=${3:-1,1000,10000}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-queuebench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/" ./cmd/decree-controller ./cmd/decree-worker ./cmd/decree-supervisor ./bench/queue)
"$tmp/queue" -bin "$tmp" -k "$K" -files "$FILES" -queues "$QUEUES"
