#!/usr/bin/env bash
# Runs cargo-nextest $NEXTEST_VERSION (testbed/versions.sh), installing it first from crates.io when
# the cache lacks it: $TESTBED_CACHE/nextest-<version>/bin/cargo-nextest, like Helm and actionlint
# (one build per version, several minutes cold on two cores, nothing when warm). `make test` runs the
# suite with it (scripts/test.sh): one process per test, the time of each printed, the slowest listed
# at the end, and the end-to-end tests scheduled by the test groups of .config/nextest.toml.
#
#   scripts/nextest.sh <nextest arguments>...   e.g. scripts/nextest.sh run -p flow-core
#   scripts/nextest.sh --path                   install if needed, print the binary's path
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../testbed/versions.sh
. "$here/../testbed/versions.sh"
d=$TESTBED_CACHE/nextest-$NEXTEST_VERSION
nextest=$d/bin/cargo-nextest
if [ ! -f "$d/.done" ]; then
  mkdir -p "$TESTBED_CACHE"
  # One build at a time per cache, as testbed/build.sh does.
  exec 9>"$TESTBED_CACHE/.nextest-build.lock"
  flock 9
  if [ ! -f "$d/.done" ]; then
    printf '[nextest] installing cargo-nextest %s from crates.io\n' "$NEXTEST_VERSION" >&2
    start=$(date +%s)
    # A target dir of its own, removed afterwards: only the binary is kept. Without the
    # self-update feature (the version is pinned here) and at opt-level 1 (the runner waits on the
    # tests, it does not compute): 5.6 min of CPU instead of 8.8 on this machine's 2 cores.
    CARGO_TARGET_DIR="$d/.target" CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
      cargo install --locked --quiet --root "$d" --version "$NEXTEST_VERSION" \
      --no-default-features --features default-no-update cargo-nextest
    rm -rf "$d/.target"
    touch "$d/.done"
    printf '[nextest] installed in %s s\n' "$(( $(date +%s) - start ))" >&2
  fi
  exec 9>&-
fi
if [ "${1:-}" = --path ]; then
  echo "$nextest"
  exit 0
fi
exec "$nextest" nextest "$@"
