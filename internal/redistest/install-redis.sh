#!/usr/bin/env bash
# Installs redis-server (and redis-cli) when missing, for the tests of
# taskstore and anything else using internal/redistest. CI calls this before
# `go test`; it is safe to run when Redis is already installed.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
# The package starts a system Redis on 6379; the tests never use it.
command -v redis-server
