#!/usr/bin/env bash
# Lint
#
# Runs the linters (disabled in the registry, so never listed).
