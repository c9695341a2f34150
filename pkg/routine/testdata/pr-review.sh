#!/usr/bin/env bash
# PR Review routine
#
# Reviews the current branch and writes comments.
set -euo pipefail

# Parameters (decree injects these as env vars)
spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"
target_branch="${target_branch:-main}"   # Custom parameter
reviewer='alice smith'
max_files=20
computed="$(date +%s)"
other="${HOME:-x}"
escaped="a \"quoted\" word"

echo "running"
late_var=1
