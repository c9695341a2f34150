#!/usr/bin/env bash
# Notify
#
# A shared routine (mounted at /routines): appends the message to
# notifications.log in the project. Enable it under shared_routines: in
# .decree/config.yml.
set -euo pipefail

message_file="${message_file:-}"
message_id="${message_id:-}"

{
  echo "## $message_id"
  cat "$message_file"
} >> notifications.log
