#!/usr/bin/env bash
# Review the guide
#
# Stands in for an AI reviewer: counts the words of GUIDE.md and records
# the review in REVIEWS.md.
set -euo pipefail

message_file="${message_file:-}"
message_id="${message_id:-}"

[ -f GUIDE.md ] || { echo "review: there is no GUIDE.md to review" >&2; exit 2; }
words=$(wc -w < GUIDE.md)
what=$(grep -v '^ *$' "$message_file" | tail -n 1)
printf -- '- %s: %s (%s words)\n' "$message_id" "$what" "$words" >> REVIEWS.md
echo "reviewed: ${what}"
