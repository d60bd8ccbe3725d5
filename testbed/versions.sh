# shellcheck shell=bash disable=SC2034  # sourced by build.sh, tb and kafka-tool
# Versions of every test-bed part. The build cache is keyed by these, so
# changing one rebuilds only that part.
KAFKA_VERSION=4.1.1
# log4j 2 release that Kafka $KAFKA_VERSION itself resolves; its slf4j binding is added
KAFKA_LOG4J_VERSION=2.24.3
K8S_VERSION=1.36.3
ETCD_VERSION=3.6.16
KWOK_VERSION=0.8.0
TESTBED_CACHE=${TESTBED_CACHE:-$HOME/.cache/ankka-flow-testbed}
# Helm, for the chart's tests (scripts/helm.sh builds it into the same cache)
HELM_VERSION=3.22.0
# actionlint, for `make lint` (scripts/actionlint.sh builds it into the same cache)
ACTIONLINT_VERSION=1.7.12
# cargo-nextest, the test runner of `make test` (scripts/nextest.sh installs it into the same cache)
NEXTEST_VERSION=0.9.151
