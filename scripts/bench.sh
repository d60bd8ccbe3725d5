#!/usr/bin/env bash
# Benchmarks the reset against Kafka's own tool, the operator's memory and restart time, and the CLI's
# wall time, on the test bed (see docs/performance.md). Run on demand; not part of CI or `make test`.
# Starts the test bed if needed (unless one's settings are loaded), builds the release binaries, then
# runs flow-bench, which prints a markdown table and writes it to target/bench/results.md.
# Usage: scripts/bench.sh [flow-bench args, e.g. --reps 1 --groups 1,10 --partitions 3,500 --flows 100]
set -euo pipefail
cd "$(dirname "$0")/.."

# A test bed whose settings are loaded already (`eval "$(<repo>/testbed/tb env)"`, for example a shared
# one started from another worktree) is used as it is; otherwise this worktree's is started.
if [ -z "${FLOW_TESTBED_RUN:-}" ]; then
  testbed/tb up
  eval "$(testbed/tb env)"
fi

# What the binaries are built from: the commit, and any uncommitted change in the worktree.
mkdir -p target/bench
{ echo "built $(date -u '+%Y-%m-%d %H:%M:%S') UTC from $(git rev-parse HEAD)"; echo "git status --short:"; git status --short; } \
  >target/bench/build.txt
cargo build --release -p flow-operator -p flow-cli
cargo build --release -p flow-testbed --bin flow-bench --bin flow-standin
cat target/bench/build.txt >&2
exec target/release/flow-bench "$@"
