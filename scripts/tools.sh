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
stamp="$tools/bin/.protoc-gen-versions"
want="$PROTOC_GEN_GO_VERSION $PROTOC_GEN_GO_GRPC_VERSION"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  GOBIN="$tools/bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  GOBIN="$tools/bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
  echo "$want" > "$stamp"
fi
lint="$tools/bin/.lint-versions"
want="$STATICCHECK_VERSION $DEADCODE_VERSION"
if [ "$(cat "$lint" 2>/dev/null)" != "$want" ]; then
  GOBIN="$tools/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
  GOBIN="$tools/bin" go install "golang.org/x/tools/cmd/deadcode@$DEADCODE_VERSION"
  echo "$want" > "$lint"
fi
echo "$tools/bin"
