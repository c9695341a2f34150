#!/usr/bin/env bash
# Rust Develop
#
# Like develop, for Rust projects: the AI tool implements the message, then
# cargo builds and tests it, and the AI fixes failures from the output until
# the build and tests pass.
set -euo pipefail

spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"
fix_rounds="${fix_rounds:-2}"

# Pre-check: `decreectl process --dry-run` and `decreectl routines --check`
# run this file with DECREE_PRE_CHECK=true to ask whether it can run here.
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then
{{.PreCheck}}
  command -v cargo >/dev/null 2>&1 || { echo "cargo is not on PATH; install Rust (rustup) first"; exit 1; }
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

ai "$task Implement it completely in this Rust project."
for round in $(seq 0 "$fix_rounds"); do
  if cargo build --release >"${message_dir}/cargo.log" 2>&1 && cargo test >>"${message_dir}/cargo.log" 2>&1; then
    exit 0
  fi
  [ "$round" -lt "$fix_rounds" ] || break
  ai "$task The build or tests fail; the output is in ${message_dir}/cargo.log. Fix the code."
done
echo "cargo build/test still failing; see ${message_dir}/cargo.log" >&2
exit 1
