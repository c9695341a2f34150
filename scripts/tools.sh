#!/usr/bin/env bash
# Installs the pinned code-generation tools into .tools/ (idempotent) and
# prints the directory to put on PATH. buf comes from the npm registry
# (a prebuilt binary inside the package, seconds to install); the protoc
# plugins come from the Go module proxy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
BUF_VERSION=1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
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
echo "$tools/bin"
