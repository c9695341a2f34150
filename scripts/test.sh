#!/usr/bin/env bash
# The project's whole test suite, exactly as CI runs it: formatting, vet,
# a darwin cross-build and vet, staticcheck, proto lint/format/generation drift, then every Go test with
# the race detector. Tests that need an external tool (jupyter, git, GNU patch,
# rsync) skip when it is missing, unless DECREE_REQUIRE_TOOLS=1 (CI), which
# turns those skips into failures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
PATH="$("$root/scripts/tools.sh"):$PATH"

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files -co --exclude-standard '*.go' | grep -v '\.pb\.go$') || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "macOS: build and vet darwin/arm64 and darwin/amd64"
# Linux-only code (inotify, subreaper, splice, syncfs) sits behind build
# tags with a plain fallback; this keeps `GOOS=darwin go build ./...`
# working for the laptops most users run decreectl on.
for arch in arm64 amd64; do
  GOOS=darwin GOARCH=$arch go build ./...
  GOOS=darwin GOARCH=$arch go vet ./...
done

step "staticcheck"
staticcheck ./...

step "buf lint / format"
buf lint
buf format -d --exit-code

step "generated code is up to date"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
buf generate -o "$tmp"
buf build --as-file-descriptor-set --exclude-imports -o "$tmp/proto/decree/v1/decree.binpb"
# source.go is written by hand (it embeds decree.binpb); everything else
# there is generated and must match.
if ! diff -r -x '*.proto' -x source.go "$tmp/proto/decree/v1" proto/decree/v1 >/dev/null; then
  diff -r -x '*.proto' -x source.go "$tmp/proto/decree/v1" proto/decree/v1 | head -40
  echo "generated code differs from proto/: run scripts/generate.sh and commit"; exit 1
fi

step "go test -race"
go test -race -count=1 -timeout 20m "$@" ./...
