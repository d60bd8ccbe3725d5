# Sourced by testbed/tb: the test bed's configuration (its CAs, certificates and keys, the test
# tokens, kubeconfigs, and each part's configuration files). Uses tb's layout and port variables.
# shellcheck shell=bash
# ---- configuration -----------------------------------------------------------
b64() { base64 | tr -d '\n'; }

make_pki() {
  [ -f "$PKI/.done" ] && return 0
  log "making certificates and keys in $PKI"
  rm -rf "$PKI"; mkdir -p "$PKI"
  (
    cd "$PKI"
    # a CA, and a serving certificate it signs: rustls (the Rust kube client)
    # wants a real chain with the IP in subjectAltName
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
    cat >ca.ext <<'EOF'
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
EOF
    openssl req -new -key ca.key -subj "/CN=flow-testbed-ca" -out ca.csr
    openssl x509 -req -in ca.csr -signkey ca.key -days 3650 -sha256 \
      -set_serial "0x$(openssl rand -hex 8)" -extfile ca.ext -out ca.crt 2>/dev/null
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out apiserver.key 2>/dev/null
    cat >apiserver.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1, DNS:localhost, IP:10.0.0.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
EOF
    openssl req -new -key apiserver.key -subj "/CN=kube-apiserver" -out apiserver.csr
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -days 3650 -sha256 \
      -set_serial "0x$(openssl rand -hex 8)" -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    # service-account token signing key pair
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # static bearer token of the admin user (group system:masters), then the
    # fixed test identities (see test_token_lines)
    echo "$(openssl rand -hex 24),admin,admin-uid,\"system:masters\"" >tokens.csv
    test_token_lines >>tokens.csv
    rm -f ./*.csr
    chmod 600 ./*.key tokens.csv
  ) || die "making certificates with openssl failed"
  touch "$PKI/.done"
}

# The Kafka listeners' own PKI, in $KPKI (kept across `down`, like the API
# server's): a CA, the broker's certificate (SAN 127.0.0.1 and localhost) with
# its key in one PEM file for the broker's PEM keystore (KIP-651), the client
# certificate of user `shop` (CN=shop) with its key plain and encrypted, and
# what the failure tests need: a second CA that signed nothing of the broker's,
# a client certificate that CA signed, and an expired client certificate. Then
# the token endpoint's RSA keys: signer.key (in the key set the broker trusts)
# and rogue.key (not in it). Test credentials on loopback listeners only.
make_kafka_pki() {
  [ -f "$KPKI/.done" ] && return 0
  log "making the Kafka listeners' certificates and keys in $KPKI"
  rm -rf "$KPKI"; mkdir -p "$KPKI"
  (
    cd "$KPKI"
    ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    serial() { echo "0x$(openssl rand -hex 8)"; }
    printf '%s\n' 'basicConstraints = critical, CA:TRUE' 'keyUsage = critical, keyCertSign, cRLSign, digitalSignature' \
      'subjectKeyIdentifier = hash' >ca.ext
    printf '%s\n' 'basicConstraints = critical, CA:FALSE' 'keyUsage = critical, digitalSignature, keyEncipherment' \
      'extendedKeyUsage = serverAuth, clientAuth' 'subjectKeyIdentifier = hash' 'authorityKeyIdentifier = keyid' \
      'subjectAltName = IP:127.0.0.1, DNS:localhost' >broker.ext
    printf '%s\n' 'basicConstraints = critical, CA:FALSE' 'keyUsage = critical, digitalSignature' \
      'extendedKeyUsage = clientAuth' 'subjectKeyIdentifier = hash' 'authorityKeyIdentifier = keyid' >client.ext
    for ca in ca other-ca; do
      ec $ca.key
      openssl req -new -x509 -key $ca.key -subj "/CN=flow-testbed-kafka-$ca" -days 3650 -sha256 \
        -set_serial "$(serial)" -extensions v3_ca -config <(printf '[req]\ndistinguished_name=dn\n[dn]\n[v3_ca]\n'; cat ca.ext) \
        -out $ca.crt
    done
    # sign <csr> <ca> <ext> <days> <out>
    sign() {
      openssl x509 -req -in "$1" -CA "$2.crt" -CAkey "$2.key" -days "$4" -sha256 -set_serial "$(serial)" \
        -extfile "$3" -out "$5" 2>/dev/null
    }
    ec broker.key
    openssl req -new -key broker.key -subj "/CN=127.0.0.1" -out broker.csr
    sign broker.csr ca broker.ext 3650 broker.crt
    cat broker.key broker.crt >broker.pem
    ec client.key
    openssl req -new -key client.key -subj "/CN=shop" -out client.csr
    sign client.csr ca client.ext 3650 client.crt
    # valid until a day before it was issued: expired from the start
    sign client.csr ca client.ext -1 client-expired.crt
    sign client.csr other-ca client.ext 3650 client-foreign.crt
    openssl pkcs8 -topk8 -in client.key -v2 aes-256-cbc -passout pass:client-key-secret -out client-encrypted.key
    openssl genrsa -out signer.key 2048 2>/dev/null
    openssl genrsa -out rogue.key 2048 2>/dev/null
    rm -f ./*.csr ./*.ext ./*.srl
    chmod 600 ./*.key broker.pem
  ) || die "making the Kafka certificates with openssl failed"
  touch "$KPKI/.done"
}

# Fixed bearer tokens of users that play the operator's service accounts, so
# that end-to-end tests run the operator with exactly the RBAC that deploy/
# grants (testbed/tests/deploy.rs). A token whose user is
# system:serviceaccount:<ns>:<name>, in the groups system:serviceaccounts and
# system:serviceaccounts:<ns>, matches RBAC subjects of kind ServiceAccount.
# These users hold no rights until a test binds some; the API server listens on
# 127.0.0.1 only. Format: token,user,uid,"group1,group2".
test_token_lines() {
  local sa
  for sa in ankka-flow-operator ankka-flow-operator-noevents; do
    printf '%s-test-token,system:serviceaccount:ankka-flow:%s,%s-test-uid,"system:serviceaccounts,system:serviceaccounts:ankka-flow"\n' \
      "$sa" "$sa" "$sa"
  done
}

# Add the test token lines that a token file made by an older tb lacks.
ensure_test_tokens() {
  local line
  while IFS= read -r line; do
    grep -qxF -- "$line" "$PKI/tokens.csv" || printf '%s\n' "$line" >>"$PKI/tokens.csv"
  done < <(test_token_lines)
}

kubeconfig_text() {
  local token
  token=$(awk -F, '$2 == "admin" { print $1; exit }' "$PKI/tokens.csv")
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: flow-testbed
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(b64 <"$PKI/ca.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: flow-testbed
  context:
    cluster: flow-testbed
    user: admin
    namespace: default
current-context: flow-testbed
EOF
}

# What both brokers set alike: one node holds every partition and replica of the internal topics,
# and groups rebalance at once.
single_node_properties() {
  cat <<'EOF'
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
EOF
}

# The users of the ACL listener (SASL/PLAIN; test credentials on loopback), name:password:
# the operator's principal, and the principals of the streamlets of two tenant namespaces.
# What each may do is only what Kafka ACLs allow it: the tests that use them grant and
# remove their ACLs themselves (testbed/tests/hostile/acls.rs).
ACL_USERS=(operator:operator-secret shop-streamlets:shop-streamlets-secret tenant-streamlets:tenant-streamlets-secret)
acl_users() { local u; for u in "${ACL_USERS[@]}"; do printf 'user_%s="%s" ' "${u%%:*}" "${u#*:}"; done; }

# The principals the other listeners present, super users so that they work without ACLs
# as before: ANONYMOUS (PLAINTEXT, SSL without a client certificate, and the controller
# listener the broker itself uses), the PLAIN users admin and shop and the SCRAM user shop,
# the client certificate's CN=shop (mutual TLS), and the OAUTHBEARER token subject
# flow-operator (tokens.py).
super_users() { echo "User:ANONYMOUS;User:admin;User:shop;User:CN=shop;User:flow-operator"; }

write_configs() {
  mkdir -p "$CONF"
  # the components read their own copy, so a test that edits $KUBECONFIG
  # cannot break them
  kubeconfig_text >"$CONF/admin.kubeconfig"
  if ! cmp -s "$CONF/admin.kubeconfig" "$KUBECONFIG_OUT"; then
    cp "$CONF/admin.kubeconfig" "$KUBECONFIG_OUT"
  fi
  chmod 600 "$CONF/admin.kubeconfig" "$KUBECONFIG_OUT"
  cat >"$CONF/kafka.properties" <<EOF
# written by testbed/tb on every start
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT,SSL://127.0.0.1:$KAFKA_SSL_PORT,MTLS://127.0.0.1:$KAFKA_MTLS_PORT,SCRAM://127.0.0.1:$KAFKA_SCRAM_PORT,OAUTH://127.0.0.1:$KAFKA_OAUTH_PORT,ACL://127.0.0.1:$KAFKA_ACL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT,SSL://127.0.0.1:$KAFKA_SSL_PORT,MTLS://127.0.0.1:$KAFKA_MTLS_PORT,SCRAM://127.0.0.1:$KAFKA_SCRAM_PORT,OAUTH://127.0.0.1:$KAFKA_OAUTH_PORT,ACL://127.0.0.1:$KAFKA_ACL_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,MTLS:SSL,SCRAM:SASL_SSL,OAUTH:SASL_SSL,ACL:SASL_SSL
# SASL/PLAIN on 19094 with two static test users, admin and shop (super users, below)
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_shop="shop-secret";
# TLS on every secured listener: the broker's key and certificate, and the CA
# it trusts for client certificates, as PEM files (KIP-651)
ssl.keystore.type=PEM
ssl.keystore.location=$KPKI/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$KPKI/ca.crt
ssl.client.auth=none
# mutual TLS on $KAFKA_MTLS_PORT: a client certificate signed by the CA is required
listener.name.mtls.ssl.client.auth=required
# SASL_SSL on $KAFKA_SCRAM_PORT: SCRAM users live in the cluster metadata (see kafka_exec)
listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256
listener.name.scram.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.scram.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
# SASL_SSL on $KAFKA_OAUTH_PORT: OAUTHBEARER with signed JWTs, validated against the
# token endpoint's key set (the JVM allows that URL, see kafka_exec)
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
# Kafka 4.1's default validator class (DefaultJwtValidator), built by the handler
# without a key resolver, checks only the token's form and claims, never its
# signature (a token signed by any key passes): name the broker's validator. The
# handler reads these four unprefixed (listener-prefixed, they did not reach it).
sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator
sasl.oauthbearer.jwks.endpoint.url=$(jwks_url)
sasl.oauthbearer.expected.audience=kafka-testbed
sasl.oauthbearer.expected.issuer=http://127.0.0.1:$TOKENS_PORT
# SASL_SSL on $KAFKA_ACL_PORT, mechanism PLAIN: the principals that Kafka ACLs govern, the
# operator's and one per tenant namespace's streamlets (docs/testbed.md)
listener.name.acl.sasl.enabled.mechanisms=PLAIN
listener.name.acl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required $(acl_users);
# The authorizer, denying by default (allow.everyone.if.no.acl.found stays false): every
# principal that the other listeners present is a super user, so they work as before
# without ACLs; the ACL listener's principals get only what ACLs allow them
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=$(super_users)
log.dirs=$DATA/kafka
$(single_node_properties)
num.network.threads=2
num.io.threads=2
auto.create.topics.enable=false
EOF
  cat >"$CONF/kafka-autocreate.properties" <<EOF
# written by testbed/tb on every start
# The second broker: a cluster of its own with auto.create.topics.enable=true, so
# tests can see whether a client of ours makes a missing topic appear (case C1).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_AC_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_AC_PORT,CONTROLLER://127.0.0.1:$KAFKA_AC_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_AC_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA/kafka-autocreate
$(single_node_properties)
num.network.threads=1
num.io.threads=1
num.recovery.threads.per.data.dir=1
background.threads=2
auto.create.topics.enable=true
EOF
}
