#!/usr/bin/env bash
# Builds (once) and caches every test-bed part, keyed by version:
#   $TESTBED_CACHE/kafka-<v>/libs      Kafka broker + tools classpath (Maven Central)
#   $TESTBED_CACHE/k8s-<v>/bin         kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#   $TESTBED_CACHE/etcd-<v>/bin/etcd   etcd
#   $TESTBED_CACHE/kwok-<v>/bin/kwok   kwok, plus its default stage files
# Usage: testbed/build.sh [kafka|k8s|etcd|kwok]...   (default: all)
# A part is done when its `.done` marker exists; a failed build leaves none.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh source-path=SCRIPTDIR
. "$here/versions.sh"
mkdir -p "$TESTBED_CACHE"
log() { printf '[testbed build] %s\n' "$*" >&2; }
# One build at a time per cache: a second caller waits, then finds the markers.
exec 9>"$TESTBED_CACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $TESTBED_CACHE/.build.lock; waiting for it"
  flock 9
fi

kafka_pom() {
  # The Kafka POMs bring slf4j-api 1.7 and log4j-core but no binding between
  # them, so without log4j-slf4j-impl the broker logs nothing at all.
  cat <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>testbed</groupId><artifactId>kafka-classpath</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$KAFKA_LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
}

build_kafka() {
  local d="$TESTBED_CACHE/kafka-$KAFKA_VERSION"
  # the marker counts only while the POM it was built from is unchanged
  if [ -f "$d/.done" ] && [ "$(kafka_pom)" = "$(cat "$d/pom.xml" 2>/dev/null)" ]; then return 0; fi
  built_now=1
  log "kafka $KAFKA_VERSION: resolving the broker and tools classpath from Maven Central"
  rm -rf "$d/libs" "$d/.done"; mkdir -p "$d"
  kafka_pom > "$d/pom.xml"
  mvn -B -q -Dstyle.color=never -f "$d/pom.xml" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$d/libs" -DincludeScope=runtime
  if ! compgen -G "$d/libs/log4j-core-*.jar" >/dev/null; then
    log "kafka: no log4j-core came with the POM; the broker will log to stdout only"
  fi
  touch "$d/.done"
}

k8s_ldflags() {
  local minor; minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  local v="v$K8S_VERSION"
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

build_k8s() {
  local d="$TESTBED_CACHE/k8s-$K8S_VERSION"
  [ -f "$d/.done" ] && return 0
  built_now=1
  log "kubernetes $K8S_VERSION: building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (10-25 min cold)"
  mkdir -p "$d/bin" "$d/src"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
  (
    cd "$d/src"
    [ -f go.mod ] || go mod init testbed/k8sbins >/dev/null 2>&1
    # k8s.io/kubernetes points its staging modules at ./staging with replace
    # directives, which a dependent module ignores: repeat them, each pointing
    # at the published v0.<minor>.<patch> tag, read from the downloaded go.mod.
    gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
    go mod edit -json "$gomod" | python3 -c '
import json,sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./staging/"): print(r["Old"]["Path"])' |
      while read -r m; do go mod edit -replace="$m=$m@v0.${K8S_VERSION#1.}"; done
    go get "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy -e >/dev/null 2>&1 || true
    go build -trimpath -ldflags "$(k8s_ldflags)" -o "$d/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  )
  touch "$d/.done"
}

build_etcd() {
  local d="$TESTBED_CACHE/etcd-$ETCD_VERSION"
  [ -f "$d/.done" ] && return 0
  built_now=1
  log "etcd $ETCD_VERSION: building"
  mkdir -p "$d/bin" "$d/src"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
  (
    cd "$d/src"
    [ -f go.mod ] || go mod init testbed/etcd >/dev/null 2>&1
    # etcd's server module has replace directives of its own, so `go install`
    # refuses it; building it as a dependency's main package works.
    go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$d/bin/etcd" go.etcd.io/etcd/server/v3
  )
  touch "$d/.done"
}

build_kwok() {
  local d="$TESTBED_CACHE/kwok-$KWOK_VERSION"
  [ -f "$d/.done" ] && return 0
  built_now=1
  log "kwok $KWOK_VERSION: building"
  mkdir -p "$d/bin" "$d/stages"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
  GOBIN="$d/bin" go install "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  local src; src=$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage
  local f
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    cat "$src/$f"; echo '---'
  done > "$d/stages/default.yaml"
  touch "$d/.done"
}

parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(kafka etcd kwok k8s)
for p in "${parts[@]}"; do
  declare -F "build_$p" >/dev/null || { log "unknown part '$p' (parts: kafka etcd kwok k8s)"; exit 2; }
done
for p in "${parts[@]}"; do
  start=$(date +%s) built_now=0
  "build_$p"
  # a part found in the cache says nothing
  [ "$built_now" = 0 ] || log "$p ready ($(( $(date +%s) - start )) s)"
done
