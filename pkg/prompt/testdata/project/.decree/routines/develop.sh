#!/usr/bin/env bash
# Develop
#
# Implements the message with the AI tool, then checks it.
set -euo pipefail
