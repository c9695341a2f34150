#!/usr/bin/env bash
# Peak RSS of decreectl (embedded controller + local worker) running a
# message whose routine writes one large random file and fails three times
# (diffed each attempt, reverted twice, dead-lettered), against `git add`
# of a file of the same size measured in the same run.
#
#   bench/memory/run.sh [SIZES]      SIZES in MB, default "1,200,1024"
set -euo pipefail
SIZES=${1:-1,200,1024}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-membench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/decreectl" ./cmd/decreectl && go build -o "$tmp/membench" ./bench/memory)
"$tmp/membench" -decreectl "$tmp/decreectl" -sizes "$SIZES"
