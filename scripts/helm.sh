#!/usr/bin/env bash
# Runs Helm $HELM_VERSION (testbed/versions.sh), building it first from the Go module proxy when
# the cache lacks it: $TESTBED_CACHE/helm-<version>/bin/helm, like the test bed's own parts (one
# build per version, a few minutes cold, nothing when warm).
#
#   scripts/helm.sh <helm arguments>...    e.g. scripts/helm.sh lint charts/ankka-flow
#   scripts/helm.sh --path                 build if needed, print the binary's path
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../testbed/versions.sh
. "$here/../testbed/versions.sh"
d=$TESTBED_CACHE/helm-$HELM_VERSION
helm=$d/bin/helm
if [ ! -f "$d/.done" ]; then
  mkdir -p "$TESTBED_CACHE"
  # One build at a time per cache, as testbed/build.sh does.
  exec 9>"$TESTBED_CACHE/.helm-build.lock"
  flock 9
  if [ ! -f "$d/.done" ]; then
    printf '[helm] building helm %s from the Go module proxy\n' "$HELM_VERSION" >&2
    start=$(date +%s)
    mkdir -p "$d/bin"
    # A build cache of its own: a shared one that another build trims meanwhile breaks this one.
    CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOBIN="$d/bin" GOCACHE="$d/.gocache" \
      go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
      "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
    rm -rf "$d/.gocache"
    touch "$d/.done"
    printf '[helm] built in %s s\n' "$(( $(date +%s) - start ))" >&2
  fi
  exec 9>&-
fi
if [ "${1:-}" = --path ]; then
  echo "$helm"
  exit 0
fi
exec "$helm" "$@"
