#!/usr/bin/env bash
# Regenerates the Go code of proto/decree/v1 with the pinned tools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PATH="$("$root/scripts/tools.sh"):$PATH"
cd "$root"
buf format -w
buf lint
buf generate
# The descriptors with their comments, which reflection serves (protoc-gen-go
# strips source info from the descriptors it embeds): see
# proto/decree/v1/source.go.
buf build --as-file-descriptor-set --exclude-imports -o proto/decree/v1/decree.binpb
