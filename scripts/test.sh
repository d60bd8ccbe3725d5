#!/usr/bin/env bash
# Runs every test: builds and starts the test bed if needed (Kafka + Kubernetes on 127.0.0.1), builds
# the workspace, checks that flow-core stays free of I/O crates, then runs all tests, the end-to-end
# ones against the test bed. Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

testbed/tb up
eval "$(testbed/tb env)"

# flow-core must stay pure (README.md, Layout): no I/O or async crate in its normal dependencies.
bad=$(cargo tree -p flow-core -e normal --prefix none 2>/dev/null | awk '{print $1}' \
  | grep -xE 'tokio|futures|futures-util|kube|kube-client|kube-runtime|hyper|reqwest|rdkafka|rdkafka-sys|sled|tracing-subscriber' \
  | sort -u | tr '\n' ' ' || true)
if [ -n "$bad" ]; then
  echo "flow-core depends on I/O or async crates: $bad" >&2
  exit 1
fi

cargo build --workspace --bins
# Helm for the chart's tests (testbed/tests/chart.rs): built from the Go module proxy into the test
# bed's cache the first time, nothing when warm. The image test installs buildah itself.
scripts/helm.sh --path >/dev/null
cargo test --workspace --no-fail-fast "$@"
