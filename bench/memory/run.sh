#!/usr/bin/env bash
# Peak RSS of decreectl (embedded controller + local worker) running a
# message whose routine writes one large random file and fails three times
# (diffed each attempt, reverted twice, dead-lettered), against `git add`
# of a file of the same size measured in the same run.
#
# With -message, the peak RSS of decreectl, decree-controller and
# decree-worker (embedded, separate, replica) for one message whose body is
# SIZES MB, against `cat` of the body into a file.
#
#   bench/memory/run.sh [SIZES]           SIZES in MB, default "1,200,1024"
#   bench/memory/run.sh -message [SIZES]  body sizes in MB, default "60"
set -euo pipefail
scenario=file
if [ "${1:-}" = "-message" ]; then
  scenario=message
  shift
fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/decree-membench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/" ./cmd/decreectl ./cmd/decree-controller ./cmd/decree-worker && go build -o "$tmp/membench" ./bench/memory)
if [ "$scenario" = message ]; then
  "$tmp/membench" -scenario message -bins "$tmp" -sizes "${1:-60}"
else
  "$tmp/membench" -decreectl "$tmp/decreectl" -sizes "${1:-1,200,1024}"
fi
