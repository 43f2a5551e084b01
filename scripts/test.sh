#!/usr/bin/env bash
# Runs taskgate's whole test suite on a fresh Debian machine with Go and
# Node/npm: installs what the tests need, checks the Helm chart (with helm
# built from the Go module proxy), then `go test -race ./...` (unit tests,
# the real-redis-server suites and the e2e tests of the built binary driven
# by the go-sdk and TypeScript SDK clients).
#
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestName).
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The store and e2e suites start their own redis-server on a free port;
# they never use one already running. Installed with apt-get when missing.
bash internal/redistest/install-redis.sh >/dev/null

# The TypeScript SDK client used by the e2e tests, from package-lock.json.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "test.sh: node and npm are required for the e2e tests" >&2
  exit 1
fi
(cd e2e/js && npm ci --no-audit --no-fund --loglevel=error)
# A real OpenID provider (oidc-provider) for the --auth-issuer tests.
(cd e2e/oidc && npm ci --no-audit --no-fund --loglevel=error)
# The official MCP conformance suite, with the Node 22 it needs (from npm).
(cd e2e/conformance && npm ci --no-audit --no-fund --loglevel=error)

# Headless Chromium for the console's browser test (e2e TestConsoleBrowser,
# which skips when it is missing). Not fatal: no network, no browser test.
if ! command -v chromium >/dev/null 2>&1; then
  (need_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive need_root apt-get install -y -qq chromium) >/dev/null 2>&1 ||
    echo "test.sh: could not install chromium; TestConsoleBrowser will be skipped" >&2
fi

# helm for the chart's check, built from the Go module proxy
# (helm.sh/helm/v4) once into a directory beside Go's build cache and
# reused while present (a first build takes minutes on a loaded machine).
HELM_VERSION=v4.3.1
HELM="$(go env GOCACHE)/../taskgate-helm/$HELM_VERSION/helm"
if [ ! -x "$HELM" ]; then
  GOFLAGS=-mod=mod GOBIN="$(dirname "$HELM")" go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi
export HELM

go vet ./...
# The Helm chart: lint, a values matrix rendered and strictly decoded into
# the Kubernetes API types, deploy/kubernetes/* equal to its render. A
# module of its own (deploy/helm/check), so k8s.io/api stays out of go.mod.
(cd deploy/helm/check && go vet ./... && go test -count=1 ./...)
# go test prints a failing test's log (and the e2e tests the gateways'
# logs) before its package's FAIL line, so the assertion that failed can be
# far above the end of a long output. On failure, repeat the failing tests
# and the lines that located an error at the very end.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if go test -race -count=1 -timeout 30m "$@" ./... 2>&1 | tee "$out"; then
  exit 0
fi
echo
echo "=== test.sh: failure summary ==="
grep -E -- '^[[:space:]]*--- FAIL|^FAIL|^panic:|^[[:space:]]+[A-Za-z0-9_]+\.go:[0-9]+: ' "$out" |
  grep -v '"level":' | cut -c1-600 | tail -n 80
exit 1
