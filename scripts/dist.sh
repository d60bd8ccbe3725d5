#!/usr/bin/env bash
# Release artifacts for linux/amd64, in target/dist/:
#   flow-<v>-linux-amd64.tar.gz           flow, kubectl-flow (a link to it), flow.1, shell
#                                         completions, LICENSE
#   flow-operator-<v>-linux-amd64.tar.gz  flow-operator, LICENSE
#   install.yaml                          the CRD and deploy/operator.yaml in one file, naming
#                                         the image <image>
#   flow.krew.yaml                        the krew plugin manifest of the flow archive
#   SHA256SUMS                            checksums of all of the above (sha256sum -c SHA256SUMS)
#
#   scripts/dist.sh [--profile release|dev] [--image NAME:TAG] [--url BASE]
#
#   --profile  which build to pack (default release; dev packs target/debug, for the test)
#   --image    the operator image install.yaml names (default ankka-flow-operator:<v>)
#   --url      where the archives will be downloaded from, for the krew manifest (default
#              <repository>/releases/download/v<v>, from Cargo.toml)
#
# The binaries link only against the C library of the host (glibc 2.34 or later: libc, libm,
# libgcc_s); docs/install.md says so. Archives are reproducible: files
# sorted, owned by 0:0, dated at the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
repository=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n1)
profile=release image="ankka-flow-operator:$version" url="$repository/releases/download/v$version"
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --url) url=$2; shift 2 ;;
    *) echo "dist.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $profile in
  release) bin=target/release; cargo build --release --locked -p flow-cli -p flow-operator ;;
  dev) bin=target/debug; [ -x $bin/flow ] && [ -x $bin/flow-operator ] || cargo build -p flow-cli -p flow-operator ;;
  *) echo "dist.sh: --profile is release or dev" >&2; exit 2 ;;
esac

out=target/dist
rm -rf "$out"
mkdir -p "$out/flow/completions" "$out/flow-operator"
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)

install -s -m 0755 "$bin/flow" "$out/flow/flow"
ln -s flow "$out/flow/kubectl-flow"
"$bin/flow" man >"$out/flow/flow.1"
"$bin/flow" completion bash >"$out/flow/completions/flow.bash"
"$bin/flow" completion zsh >"$out/flow/completions/_flow"
"$bin/flow" completion fish >"$out/flow/completions/flow.fish"
install -s -m 0755 "$bin/flow-operator" "$out/flow-operator/flow-operator"
for d in flow flow-operator; do
  install -m 0644 LICENSE "$out/$d/LICENSE"
done

pack() { # pack <dir> <archive>: the files of <dir>, at the top of the archive
  (cd "$out/$1" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --create --no-recursion --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
      --files-from=- | gzip -n) >"$out/$2"
}
flow_tgz=flow-$version-linux-amd64.tar.gz
operator_tgz=flow-operator-$version-linux-amd64.tar.gz
pack flow "$flow_tgz"
pack flow-operator "$operator_tgz"

# install.yaml: the CRD, then the operator's objects with the image named.
grep -q '^          image: ankka-flow-operator:' deploy/operator.yaml ||
  { echo "dist.sh: deploy/operator.yaml names no ankka-flow-operator image" >&2; exit 1; }
{
  echo "# Ankka Flow $version: the AnkkaFlow CRD and the operator. kubectl apply --server-side -f install.yaml"
  cat deploy/crd.yaml
  echo "---"
  sed "s|^          image: ankka-flow-operator:.*|          image: $image|" deploy/operator.yaml
} >"$out/install.yaml"

sha=$(sha256sum "$out/$flow_tgz" | cut -d' ' -f1)
cat >"$out/flow.krew.yaml" <<KREW
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: flow
spec:
  version: v$version
  homepage: $repository
  shortDescription: Verify, generate and reset Ankka Flow pipelines
  description: |
    Runs the flow CLI of Ankka Flow as kubectl flow: verify a blueprint, generate its AnkkaFlow
    resource, and rebuild a pipeline from the start with kubectl flow reset.
  platforms:
    - selector:
        matchLabels:
          os: linux
          arch: amd64
      uri: $url/$flow_tgz
      sha256: $sha
      files:
        - from: flow
          to: .
        - from: flow.1
          to: .
        - from: completions/*
          to: completions
        - from: LICENSE
          to: .
      bin: flow
KREW

(cd "$out" && sha256sum "$flow_tgz" "$operator_tgz" install.yaml flow.krew.yaml >SHA256SUMS)
rm -rf "$out/flow" "$out/flow-operator"
echo "[dist] $(cd "$out" && ls | tr '\n' ' ')in $out" >&2
