# Sourced by testbed/tb: how each part of the test bed starts and how tb knows it is ready.
# Uses tb's layout and port variables and its helpers (launch, wait_for, ...).
# shellcheck shell=bash
# ---- starting each part --------------------------------------------------------
# Internal: the process that `launch` runs for a broker whose properties are
# file $1 (<conf>/<part>.properties, data in <data>/<part>). It formats the data
# directory when it is new, then becomes the broker (same pid).
kafka_exec() {
  local props=$1 part heap
  part=${props##*/}; part=${part%.properties}
  local -a jvm=() scram=()
  case $part in
    kafka) heap=(-Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent)
      # Kafka 4 fetches an OAuth key set or token only from the URLs this system
      # property lists (none by default)
      jvm=("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=$(jwks_url)")
      mapfile -t scram < <(scram_format_args) ;;
    # a broker for a few topics and groups: small heap, serial GC, the C1 JIT only
    # (less CPU while it starts next to everything else), fewer threads
    kafka-autocreate|kafka-pair-1|kafka-pair-2) heap=(-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1) ;;
    *) echo "[testbed] _kafka-exec: unknown properties file $props"; exit 1 ;;
  esac
  if [ ! -f "$DATA/$part/meta.properties" ]; then
    # A formatted empty directory is kept per properties text and Kafka version,
    # so a start after `down` copies it instead of running one more JVM.
    local fmt id=""
    # both brokers of the pair are formatted with the pair's one cluster id
    case $part in kafka-pair-*) id=$(pair_cluster_id) || exit 1 ;; esac
    fmt=$RUN/formatted/$part/$( { echo "$KAFKA_VERSION"; cat "$props"; printf '%s\n' "${scram[@]}" "$id"; } | sha256sum | cut -c1-16)
    if [ -f "$fmt/meta.properties" ]; then
      echo "[testbed] $DATA/$part: copying the formatted empty directory $fmt"
      cp -a "$fmt/." "$DATA/$part/" || { echo "[testbed] copying failed"; exit 1; }
    else
      [ -n "$id" ] || id=$(random_cluster_id)
      echo "[testbed] formatting $DATA/$part with cluster id $id"
      "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
        -Dlog4j2.configurationFile="file:$here/conf/tools-log4j2.properties" \
        -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool format --cluster-id="$id" -c "$props" --ignore-formatted "${scram[@]}" ||
        { echo "[testbed] formatting failed"; exit 1; }
      rm -rf "${fmt%/*}"
      mkdir -p "$fmt.new" && cp -a "$DATA/$part/." "$fmt.new/" && mv "$fmt.new" "$fmt" ||
        echo "[testbed] could not keep a copy of the formatted directory in $fmt (next start formats again)"
    fi
    # a directory formatted with the SCRAM users holds them from the start
    [ ${#scram[@]} -eq 0 ] || touch "$DATA/$part.scram-users"
  fi
  exec "$JAVA" "${heap[@]}" "${jvm[@]}" \
    -Djava.awt.headless=true -Dkafka.logs.dir="$LOGS" \
    -Dlog4j2.configurationFile="file:$here/conf/kafka-log4j2.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$props"
}

# A random 16-byte Kafka Uuid in base64url, as StorageTool random-uuid prints.
# Like Kafka's own Uuid.randomUuid, never one that starts with '-': a command
# line parser takes such a value for an option (one start in 64 failed so).
random_cluster_id() {
  local id
  while id=$(openssl rand 16 | base64 | tr '+/' '-_' | tr -d '=\n') && [ "${id:0:1}" = - ]; do :; done
  [ -n "$id" ] && printf '%s\n' "$id"
}

# The cluster id of the broker pair: made once per run directory, kept beside
# the formatted directories (so across `down`, like them).
pair_cluster_id() {
  local f=$RUN/formatted/kafka-pair.cluster-id
  if [ ! -s "$f" ]; then
    mkdir -p "$RUN/formatted"
    random_cluster_id >"$f.new" && mv "$f.new" "$f" || { echo "[testbed] cannot write $f"; return 1; }
  fi
  cat "$f"
}

# The SASL_PLAINTEXT listener answers (a broker started by an older tb has none).
kafka_sasl_ready() { port_open "$KAFKA_SASL_PORT"; }

# Every secured listener accepts connections (a broker started by an older tb has none).
kafka_secured_ready() {
  port_open "$KAFKA_SSL_PORT" && port_open "$KAFKA_MTLS_PORT" && port_open "$KAFKA_SCRAM_PORT" &&
    port_open "$KAFKA_OAUTH_PORT" && port_open "$KAFKA_ACL_PORT"
}

jwks_url() { echo "http://127.0.0.1:$TOKENS_PORT/jwks"; }

# The SCRAM users of the SCRAM listener (test credentials on loopback):
# shop / shop-scram-secret for both SCRAM-SHA-512 and SCRAM-SHA-256.
SCRAM_USERS=("SCRAM-SHA-512=[name=shop,password=shop-scram-secret]" "SCRAM-SHA-256=[name=shop,password=shop-scram-secret]")
scram_format_args() { local u; for u in "${SCRAM_USERS[@]}"; do printf '%s\n' --add-scram "$u"; done; }

# A data directory formatted before the SCRAM listener existed lacks the users:
# add them once through the PLAINTEXT listener (one JVM run), then remember.
ensure_scram_users() {
  [ -f "$DATA/kafka.scram-users" ] && return 0
  local u
  log "kafka: adding the SCRAM users to a cluster formatted without them"
  # one mechanism per request: Kafka refuses to alter one user's credentials twice in one
  for u in "${SCRAM_USERS[@]}"; do
    "$here/kafka-tool" kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" --alter \
      --entity-type users --entity-name shop --add-config "${u%%=*}=[${u#*,}" >/dev/null ||
      die "adding the SCRAM users failed"
  done
  touch "$DATA/kafka.scram-users"
}

tokens_ready() { curl -sf --max-time 2 "http://127.0.0.1:$TOKENS_PORT/healthz" | grep -qx ok; }

# The broker on port $1 (default: the main one) is up when a Metadata request
# lists it (it is then registered and unfenced), and at least $2 brokers
# (default 1). One request in Python takes milliseconds; without Python, fall
# back to one JVM run of TopicCommand.
kafka_ready() {
  local port=${1:-$KAFKA_PORT} min=${2:-1}
  port_open "$port" || return 1
  if command -v python3 >/dev/null; then
    python3 - "$port" "$min" <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
cid = b"testbed-probe"
# Metadata v4, request header v1: all topics (null array), no auto-creation
body = struct.pack(">hhih", 3, 4, 1, len(cid)) + cid + struct.pack(">i", -1) + b"\x00"
s.sendall(struct.pack(">i", len(body)) + body)
def read(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit(1)
        b += c
    return b
size, = struct.unpack(">i", read(4))
corr, _throttle, brokers = struct.unpack(">iii", read(size)[:12])
sys.exit(0 if corr == 1 and brokers >= int(sys.argv[2]) else 1)
PY
  else
    "$here/kafka-tool" topics --bootstrap-server "127.0.0.1:$port" --list
  fi
}

# The broker pair is up when each of its brokers answers Metadata listing both
# (node 2 registered with node 1's controller, both unfenced).
kafka_pair_ready() {
  local port
  for port in "$KAFKA_PAIR1_PORT" "$KAFKA_PAIR2_PORT"; do
    kafka_ready "$port" 2 || return 1
  done
}

etcd_ready() { curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_ready() { curl -sf --max-time 3 --cacert "$PKI/ca.crt" "https://127.0.0.1:$APISERVER_PORT/readyz" | grep -qx ok; }
https_healthz() { curl -sfk --max-time 2 "https://127.0.0.1:$1/healthz" | grep -qx ok; }
http_healthz() { curl -sf --max-time 2 "http://127.0.0.1:$1/healthz" | grep -qx ok; }

start_tokens() {
  launch tokens python3 "$here/tokens.py" --port "$TOKENS_PORT" --keys "$KPKI"
}

start_kafka() {
  mkdir -p "$DATA/kafka"
  launch kafka env TESTBED_RUN="$RUN" "$self" _kafka-exec "$CONF/kafka.properties"
}

start_kafka_autocreate() {
  mkdir -p "$DATA/kafka-autocreate"
  launch kafka-autocreate env TESTBED_RUN="$RUN" "$self" _kafka-exec "$CONF/kafka-autocreate.properties"
}

start_kafka_pair_1() {
  mkdir -p "$DATA/kafka-pair-1"
  launch kafka-pair-1 env TESTBED_RUN="$RUN" "$self" _kafka-exec "$CONF/kafka-pair-1.properties"
}

start_kafka_pair_2() {
  mkdir -p "$DATA/kafka-pair-2"
  launch kafka-pair-2 env TESTBED_RUN="$RUN" "$self" _kafka-exec "$CONF/kafka-pair-2.properties"
}

start_etcd() {
  mkdir -p "$DATA/etcd"; chmod 700 "$DATA/etcd"
  launch etcd "$ETCD" --data-dir="$DATA/etcd" --name=testbed \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="testbed=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync=true --log-level=warn
}

start_kube_apiserver() {
  launch kube-apiserver "$K8S_BIN/kube-apiserver" --token-auth-file="$PKI/tokens.csv" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --cert-dir="$PKI" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --authorization-mode=RBAC \
    --service-account-issuer="https://127.0.0.1:$APISERVER_PORT" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
    --disable-admission-plugins=ServiceAccount \
    --endpoint-reconciler-type=none
}

start_kube_controller_manager() {
  launch kube-controller-manager "$K8S_BIN/kube-controller-manager" --kubeconfig="$CONF/admin.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --kube-api-qps=100 --kube-api-burst=200
}

start_kube_scheduler() {
  # no --authentication/authorization-kubeconfig (here and above): without a
  # front proxy they only log errors about a missing requestheader CA, and
  # /healthz, the one endpoint the test bed uses, is always allowed
  launch kube-scheduler "$K8S_BIN/kube-scheduler" --kubeconfig="$CONF/admin.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT"
}

start_kwok() {
  launch kwok "$KWOK" --kubeconfig="$CONF/admin.kubeconfig" --config="$KWOK_STAGES" \
    --manage-all-nodes=true --node-lease-duration-seconds=40 \
    --server-address="127.0.0.1:$KWOK_PORT" --node-ip=127.0.0.1 --cidr=10.244.0.0/16
}

# start part $1 unless it runs; sets started=1 when it did start it
ensure() {
  local name=$1 pid
  started=0
  if pid=$(running_pid "$name"); then
    return 0
  fi
  # a process of this run directory that lost its pid file: adopt it
  pid=$(pids_matching "$name"); pid=${pid%%$'\n'*}
  if [ -n "$pid" ]; then
    echo "$pid" >"$PIDS/$name.pid"
    log "$name: found running without a pid file (pid $pid); adopted it"
    return 0
  fi
  check_ports_free "$name"
  "start_${name//-/_}"
  started=1
  log "$name: started (pid $(<"$PIDS/$name.pid"))"
}

node_manifest() {
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $NODE
    beta.kubernetes.io/os: linux
    beta.kubernetes.io/arch: amd64
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
}

kctl() { "$K8S_BIN/kubectl" --kubeconfig="$CONF/admin.kubeconfig" "$@"; }

node_ready() {
  [ "$(kctl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
