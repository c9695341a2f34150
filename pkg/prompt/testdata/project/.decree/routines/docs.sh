#!/usr/bin/env bash
# Docs
