#!/usr/bin/env bash
# Review the guide
#
# Stands in for an AI reviewer: counts the words of GUIDE.md and records
# the review in REVIEWS.md.
set -euo pipefail

message_file="${message_file:-}"
message_id="${message_id:-}"

words=$(wc -w < GUIDE.md)
what=$(grep -m1 'Review' "$message_file")
printf -- '- %s: %s (%s words)\n' "$message_id" "$what" "$words" >> REVIEWS.md
echo "reviewed: ${what}"
