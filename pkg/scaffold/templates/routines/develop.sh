#!/usr/bin/env bash
# Develop
#
# Hands the message (a spec or a free task) to the AI tool to implement,
# then asks it a second time to check the work against the acceptance
# criteria and fix what is missing.
set -euo pipefail

spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"

# Pre-check: `decreectl process --dry-run` and `decreectl routines --check`
# run this file with DECREE_PRE_CHECK=true to ask whether it can run here.
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then
{{.PreCheck}}
  exit 0
fi

{{.AIFunction}}

task="Work item ${message_id}. The request is in ${message_file}."
if [ -n "$spec_file" ]; then
  task="$task The specification to implement is ${spec_file}."
fi
if [ -f "${message_dir}/failure-context.md" ]; then
  task="$task Earlier attempts failed; read ${message_dir}/failure-context.md first."
fi

ai "$task Implement it completely in this repository."
ai "$task Check the implementation against every acceptance criterion and fix whatever does not hold."
