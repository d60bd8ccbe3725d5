#!/usr/bin/env bash
# docs/rebuild-from-the-start.md, narrated, on the test bed: a pipeline reads its input,
# is stopped, reset with `flow reset`, and started again to read everything once more.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
# Runs a command line (a pipe, say) in the example pipeline's directory, as that page does.
in_cart() { printf '$ %s\n' "$*"; (cd examples/cart && eval "$*"); }
# Waits up to $1 seconds until the command line after it succeeds, then fails naming what it waited
# for. Every wait of the demo goes through it: an object the operator creates may not exist yet
# when the wait begins, and `kubectl wait` answers NotFound at once for an object that does not.
wait_for() {
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      printf 'demo: gave up after %ss waiting for %s (operator log: target/demo-operator.log)\n' "$seconds" "$what" >&2
      exit 1
    fi
    sleep 1
  done
}
# Whether deployment/$1 in shop exists, wants at least one replica (the operator has applied the
# started resource, not the stopped one) and has them all available.
available() {
  local want ready
  want=$(kubectl -n shop get deployment "$1" -o jsonpath='{.spec.replicas}') || return 1
  ready=$(kubectl -n shop get deployment "$1" -o jsonpath='{.status.availableReplicas}') || return 1
  [ "${want:-0}" -ge 1 ] && [ "${ready:-0}" = "$want" ] \
    && kubectl -n shop get deployment "$1" -o jsonpath='{.status.observedGeneration} {.metadata.generation}' \
      | awk '$1 == $2 { ok = 1 } END { exit !ok }'
}
no_pods() { [ -z "$(kubectl -n shop get pods -l flow.ankka.thinkmorestupidless.com/pipeline=cart -o name)" ]; }
# Whether the done annotation holds request $1 (a run before this one may have left an older id).
done_written() {
  [ "$(kubectl -n shop get aflow cart \
    -o jsonpath='{.metadata.annotations.flow\.ankka\.thinkmorestupidless\.com/reset-offsets-done}')" = "$1" ]
}
START="flow generate blueprint.conf --descriptors flow --conf prod.conf \\
  --image router=registry.example.com/cart-router:1.2 -n shop | kubectl apply -f -"
STOP="flow generate blueprint.conf --descriptors flow --conf prod.conf --conf stop.conf \\
  --image router=registry.example.com/cart-router:1.2 -n shop | kubectl apply -f -"

say "Starting the test bed (Kafka and Kubernetes on 127.0.0.1; the first run builds them, which takes a while)"
testbed/tb up
eval "$(testbed/tb env)"
cargo build -q --workspace --bins
export PATH=$PWD/target/debug:$PATH

say "Installing the AnkkaFlow CRD and the Kafka cluster Secrets 'kafka-cluster-shop' and 'kafka-cluster-default'"
run kubectl apply --server-side -f deploy/crd.yaml
wait_for 60 "the CRD to be established" \
  kubectl wait --for=condition=Established crd/ankkaflows.flow.ankka.thinkmorestupidless.com --timeout=10s
kubectl create namespace ankka-flow --dry-run=client -o yaml | kubectl apply -f - >/dev/null
run kubectl apply -f examples/cart/kafka-cluster-shop.yaml -f examples/cart/kafka-cluster-default.yaml
kubectl create namespace shop --dry-run=client -o yaml | kubectl apply -f - >/dev/null

say "Filling the input topic shop.cart-events.v1: 3 partitions of 1000 records"
testbed/kafka-tool topics --bootstrap-server "$FLOW_TESTBED_KAFKA" --delete --if-exists --topic shop.cart-events.v1 >/dev/null 2>&1 || true
sleep 1
run testbed/kafka-tool topics --bootstrap-server "$FLOW_TESTBED_KAFKA" --create --if-not-exists --topic shop.cart-events.v1 --partitions 3
seq 1 3000 | sed 's/.*/{"cart":&}/' | testbed/kafka-tool console-producer --bootstrap-server "$FLOW_TESTBED_KAFKA" --topic shop.cart-events.v1 >/dev/null

say "Starting the operator"
ledger=$(mktemp -d)
FLOW_SIDECAR_IMAGE=ghcr.io/thinkmorestupidless/ankka-flow-sidecar:0.1.0 \
  FLOW_LEDGER_DIR=$ledger FLOW_LOG_FORMAT=text FLOW_LAG_INTERVAL_SECONDS=1 FLOW_METRICS_ADDRESS=127.0.0.1:19090 \
  RUST_LOG=warn,flow_operator=info flow-operator 2> target/demo-operator.log &
op=$!
trap 'kill $op 2>/dev/null || true' EXIT

say "Checking the cart pipeline's blueprint (examples/cart), then deploying it: streamlet 'router' reads shop.cart-events.v1"
in_cart flow verify blueprint.conf --descriptors flow --conf prod.conf
in_cart "$START"
wait_for 120 "the operator to create deployment/flow-cart-router and its pod to be available" available flow-cart-router
run kubectl -n shop get aflow,pods
say "What the operator rendered for the streamlet runtime: router's streamlet.conf, from its Secret"
run kubectl -n shop get secret flow-cart-router -o go-template='{{index .data "streamlet.conf" | base64decode}}'

say "The streamlet (a stand-in for router's sidecar, which takes its topic, group and connection from that file) reads its whole input"
run flow-standin --namespace shop --pipeline cart --streamlet router --expect 3000

say "Stop the streamlets: replicas 0 in the resource, and wait until their pods are gone"
in_cart cat stop.conf
in_cart "$STOP"
wait_for 120 "the pipeline's pods to be gone" no_pods
run kubectl -n shop get pods -l flow.ankka.thinkmorestupidless.com/pipeline=cart

say "Request the reset"
printf '$ %s\n' "flow reset cart -n shop"
out=$(flow reset cart -n shop)
echo "$out"
id=${out##*: }

say "Check that it happened"
wait_for 120 "the operator to write the done annotation" done_written "$id"
run kubectl -n shop get events --field-selector involvedObject.kind=AnkkaFlow,reason=ResetOffsets
run kubectl -n shop get aflow cart -o jsonpath='{.metadata.annotations.flow\.ankka\.thinkmorestupidless\.com/reset-offsets-done}{"\n"}'
run flow reset status "$id"

say "Start the streamlets again: they read every record once more"
in_cart "$START"
wait_for 120 "deployment/flow-cart-router to be available again" available flow-cart-router
run flow-standin --namespace shop --pipeline cart --streamlet router --expect 3000 --rate 1000

say "The lag after the reset fell to zero: in the status, and on the operator's /metrics"
sleep 2
run kubectl -n shop get aflow cart -o jsonpath='{.status.reset.groups[0].lag} records left, caught up at {.status.reset.groups[0].caughtUpAt}{"\n"}'
printf '$ %s\n' "curl -s 127.0.0.1:19090/metrics | grep 'consumergroup=\"cart.router.in\"'"
curl -s 127.0.0.1:19090/metrics | grep 'consumergroup="cart.router.in"' || true
say "Done. The test bed keeps running; stop it with: testbed/tb down"
