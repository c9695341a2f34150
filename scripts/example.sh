#!/usr/bin/env bash
# Runs decree on the bundled example project (examples/guide): a copy of it
# in a temporary directory is processed with the embedded controller and a
# local worker. The routines are plain bash standing in for an AI tool, so
# nothing else is needed. Shows the runs, one checkpoint diff, and the result.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin/decreectl"
[ -x "$bin" ] || (cd "$root" && go build -o bin/ ./cmd/...)
work=$(mktemp -d "${TMPDIR:-/tmp}/decree-example.XXXXXX")
cp -r "$root/examples/guide/." "$work/"
cd "$work"
echo "== decreectl process   (in $work)"
"$bin" process
echo
echo "== decreectl runs"
"$bin" runs
retried=$("$bin" runs -o json | python3 -c 'import json,sys; print(next(r["messageId"] for r in json.load(sys.stdin)["runs"] if r["attempts"]>1))' 2>/dev/null || true)
if [ -n "$retried" ]; then
  echo
  echo "== decreectl diff $retried   (the migration that needed a second attempt)"
  "$bin" diff "$retried"
fi
echo
echo "== GUIDE.md, as the routines left it"
cat GUIDE.md
echo
echo "The project is in $work; try: cd $work && $bin status"
