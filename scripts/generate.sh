#!/usr/bin/env bash
# Regenerates the Go code of proto/decree/v1 with the pinned tools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PATH="$("$root/scripts/tools.sh"):$PATH"
cd "$root"
buf format -w
buf lint
buf generate
