#!/usr/bin/env bash
# Installs the pinned code-generation and lint tools into .tools/
# (idempotent) and prints the directory to put on PATH. buf comes from the
# npm registry (a prebuilt binary inside the package, seconds to install);
# the protoc plugins, staticcheck and deadcode come from the Go module proxy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
BUF_VERSION=1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
STATICCHECK_VERSION=v0.8.2 # staticcheck 2026.2.2 (Go 1.26)
DEADCODE_VERSION=v0.52.0   # golang.org/x/tools
mkdir -p "$tools/bin"
if [ "$("$tools/node_modules/.bin/buf" --version 2>/dev/null)" != "$BUF_VERSION" ]; then
  npm install --silent --no-audit --no-fund --prefix "$tools" "@bufbuild/buf@$BUF_VERSION" >&2
fi
ln -sf ../node_modules/.bin/buf "$tools/bin/buf"
# go_tools STAMP PKG@VERSION...: go install the packages into .tools/bin
# unless the stamp file records exactly these versions.
go_tools() {
  local stamp="$tools/bin/$1"
  shift
  if [ "$(cat "$stamp" 2>/dev/null)" != "$*" ]; then
    for p in "$@"; do GOBIN="$tools/bin" go install "$p"; done
    echo "$*" > "$stamp"
  fi
}
go_tools .protoc-gen-versions \
  "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION" \
  "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
go_tools .lint-versions \
  "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" \
  "golang.org/x/tools/cmd/deadcode@$DEADCODE_VERSION"
echo "$tools/bin"
