#!/usr/bin/env bash
# Runs every test: builds and starts the test bed if needed (Kafka + Kubernetes on 127.0.0.1), builds
# the workspace, checks that flow-core stays free of I/O crates and the CLI free of C libraries, then
# runs all tests with cargo-nextest, the end-to-end ones against the test bed, each test's time printed
# and the slow ones listed again at the end (.config/nextest.toml). Usage: scripts/test.sh [extra
# `cargo nextest run` args, e.g. -p flow-core or a filter]
set -euo pipefail
cd "$(dirname "$0")/.."

testbed/tb up
eval "$(testbed/tb env)"

# What a crate must not depend on (normal dependencies, as `cargo tree -p <crate> -e normal` lists
# them): forbid <crate> <why> <crate names, as a regular expression>.
forbid() {
  local tree bad
  tree=$(cargo tree -p "$1" -e normal --prefix none --quiet)
  bad=$(awk '{print $1}' <<<"$tree" | grep -xE "$3" | sort -u | tr '\n' ' ' || true)
  if [ -n "$bad" ]; then
    echo "$1 depends on $2: $bad" >&2
    exit 1
  fi
}
# flow-core must stay pure (README.md, Layout): no I/O or async crate in its normal dependencies.
forbid flow-core "I/O or async crates" \
  'tokio|futures|futures-util|kube|kube-client|kube-runtime|hyper|reqwest|rdkafka|rdkafka-sys|sled|tracing-subscriber'
# The CLI talks to Kubernetes alone and cross-compiles wherever Rust does (docs/install.md): no C
# library of the Kafka client or the ledger comes with it.
forbid flow-cli "C libraries or the ledger, which it does not use" \
  'rdkafka|rdkafka-sys|openssl|openssl-sys|curl|curl-sys|sled'

# The test runner (scripts/nextest.sh): installed into the test bed's cache the first time.
scripts/nextest.sh --path >/dev/null
cargo build --workspace --bins
# Helm for the chart's tests (testbed/tests/chart.rs): built from the Go module proxy into the test
# bed's cache the first time, nothing when warm. The image test installs buildah itself.
scripts/helm.sh --path >/dev/null
started=$SECONDS
scripts/nextest.sh run --workspace --no-fail-fast "$@"
# nextest runs no doctests: cargo's own runner does those (no end-to-end test is one).
if [ $# -eq 0 ]; then
  cargo test --workspace --doc --quiet
fi
echo "test: the suite took $((SECONDS - started)) s"
