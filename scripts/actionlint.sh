#!/usr/bin/env bash
# Checks the GitHub Actions workflows (.github/workflows/) with actionlint $ACTIONLINT_VERSION
# (testbed/versions.sh), building it first from the Go module proxy when the cache lacks it:
# $TESTBED_CACHE/actionlint-<version>/bin/actionlint, as scripts/helm.sh builds Helm (one build per
# version, a minute or two cold, nothing when warm). `make lint` runs it. actionlint also checks the
# shell of each `run:` step with shellcheck when shellcheck is on the PATH.
#
#   scripts/actionlint.sh [actionlint arguments]...   default: every workflow of the repository
#   scripts/actionlint.sh --path                      build if needed, print the binary's path
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../testbed/versions.sh
. "$here/../testbed/versions.sh"
d=$TESTBED_CACHE/actionlint-$ACTIONLINT_VERSION
actionlint=$d/bin/actionlint
if [ ! -f "$d/.done" ]; then
  mkdir -p "$TESTBED_CACHE"
  # One build at a time per cache, as testbed/build.sh does.
  exec 9>"$TESTBED_CACHE/.actionlint-build.lock"
  flock 9
  if [ ! -f "$d/.done" ]; then
    printf '[actionlint] building actionlint %s from the Go module proxy\n' "$ACTIONLINT_VERSION" >&2
    start=$(date +%s)
    mkdir -p "$d/bin"
    # A build cache of its own: a shared one that another build trims meanwhile breaks this one.
    CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOBIN="$d/bin" GOCACHE="$d/.gocache" \
      go install -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=v$ACTIONLINT_VERSION" \
      "github.com/rhysd/actionlint/cmd/actionlint@v$ACTIONLINT_VERSION"
    rm -rf "$d/.gocache"
    touch "$d/.done"
    printf '[actionlint] built in %s s\n' "$(( $(date +%s) - start ))" >&2
  fi
  exec 9>&-
fi
if [ "${1:-}" = --path ]; then
  echo "$actionlint"
  exit 0
fi
cd "$here/.."
exec "$actionlint" "$@"
