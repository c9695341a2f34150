#!/usr/bin/env bash
# Write a guide section
#
# Stands in for an AI tool: turns a spec into a section of GUIDE.md. When a
# spec's title is "Retries" it needs two attempts: the first leaves a draft
# behind and fails, the second finds the draft and finishes. Every section
# queues a follow-up message for the review routine.
set -euo pipefail

spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"
style="${style:-plain}"

# (The first statement ends the parameter block: assignments below it are
# ordinary variables, not parameters decree could set.)
[ -n "$spec_file" ] || { echo "write: this routine needs a spec (input_file)" >&2; exit 2; }
title=$(grep -m1 '^# ' "$spec_file" | sed 's/^# //')
slug=$(basename "$spec_file" .spec.md)
draft="drafts/${slug}.md"

echo "writing section '${title}' from ${spec_file} (style: ${style})"
if [ "$title" = "Retries" ] && [ ! -f "$draft" ]; then
  mkdir -p drafts
  printf 'draft of %s\n' "$title" > "$draft"
  echo "left a draft in ${draft}; failing so the next attempt can finish it" >&2
  exit 1
fi

{
  printf '## %s\n\n' "$title"
  awk 'BEGIN{fm=0} /^---$/{fm++; next} fm==1{next} /^# /{next} {print}' "$spec_file" | sed '/./,$!d'
  printf '\n'
} >> GUIDE.md
rm -f "$draft"
rmdir drafts 2>/dev/null || true

cat > ".decree/outbox/review-${slug}.md" <<MSG
---
routine: review
---
Review the section "${title}" of GUIDE.md.
MSG
echo "queued a review of '${title}'"
