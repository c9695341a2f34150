#!/usr/bin/env bash
# Notify
#
# A shared routine, disabled until enabled in shared_routines.
