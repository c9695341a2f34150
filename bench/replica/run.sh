#!/usr/bin/env bash
# Times a replica workspace sync against rsync -a on the same generated tree
# and prints ratios (decree / rsync).
#
#   bench/replica/run.sh [-files 20000] [-mb 300] [-changed 10] [-reps 3]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
go run ./bench/replica "$@"
