#!/usr/bin/env bash
# Release artifacts, in target/dist/ (or --out):
#   flow-<v>-<os>-<arch>.tar.gz           flow, kubectl-flow (a link to it), flow.1, shell
#                                         completions, LICENSE
#   flow-operator-<v>-linux-<arch>.tar.gz flow-operator, LICENSE
#   install.yaml                          the CRD and deploy/operator.yaml in one file, naming
#                                         the image <image>
#   flow.krew.yaml                        the krew plugin manifest of every flow archive there
#   SHA256SUMS                            checksums of every file there (sha256sum -c SHA256SUMS)
#
#   scripts/dist.sh [--profile P] [--image NAME:TAG] [--url BASE]   all of it, for this machine
#   scripts/dist.sh cli [--target TRIPLE] [--profile P] [--auditable]
#   scripts/dist.sh operator [--profile P] [--auditable]
#   scripts/dist.sh manifests [--image NAME:TAG] [--url BASE]
#
#   cli        builds flow for TRIPLE (default: this machine) and packs its archive, named for the
#              target's os (linux, darwin) and arch (amd64, arm64), adding it to the directory;
#              what the release workflow runs for each platform
#   operator   builds flow-operator for this machine and packs its archive (linux only), adding it
#              to the directory
#   manifests  writes install.yaml, flow.krew.yaml (one platform per flow archive there) and
#              SHA256SUMS (every file there); the release workflow runs it once every archive and
#              the chart are there
#   (none)     removes the archives and manifests of earlier runs from the directory, then runs cli,
#              operator and manifests for this machine (make dist)
#
#   --out        the directory to write to (default target/dist)
#   --profile    which build to pack (default release; dev packs target/debug, for the tests)
#   --target     a Rust target triple (rustup target add <triple> first); a linux-musl target makes
#                a static binary, which needs no C library on the host (docs/install.md)
#   --auditable  build with `cargo auditable` (cargo install cargo-auditable): the binary carries its
#                dependency list, which SBOM tools and scanners read
#   --image      the operator image install.yaml names (default ankka-flow-operator:<v>)
#   --url        where the archives will be downloaded from, for the krew manifest (default
#                <repository>/releases/download/v<v>, from Cargo.toml)
#
# A glibc build (the default on Linux) needs glibc 2.34 or later on the host (libc, libm,
# libgcc_s); docs/install.md says what each archive needs. Archives are reproducible: files
# sorted, owned by 0:0, dated at the commit. GNU tar packs them (`gtar` where `tar` is another, as
# on macOS: brew install gnu-tar).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
repository=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n1)
log() { printf '[dist] %s\n' "$*" >&2; }
die() { printf 'dist.sh: %s\n' "$*" >&2; exit 2; }

command=all
case ${1:-} in
  cli | operator | manifests) command=$1; shift ;;
esac
profile=release image="ankka-flow-operator:$version" url="$repository/releases/download/v$version"
target="" auditable=false out=target/dist
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=${2:?--profile needs a value}; shift 2 ;;
    --target) target=${2:?--target needs a value}; shift 2 ;;
    --auditable) auditable=true; shift ;;
    --image) image=${2:?--image needs a value}; shift 2 ;;
    --url) url=${2:?--url needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
case $profile in release | dev) ;; *) die "--profile is release or dev" ;; esac

mkdir -p "$out"
out=$(cd "$out" && pwd)
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)

# The os-arch of a Rust target triple, as Go, krew and container platforms name them.
platform_of() {
  local arch os
  case $1 in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    *) die "no release platform for target $1 (x86_64 or aarch64)" ;;
  esac
  case $1 in
    *-linux-*) os=linux ;;
    *-apple-darwin) os=darwin ;;
    *) die "no release platform for target $1 (linux or apple-darwin)" ;;
  esac
  echo "$os-$arch"
}
host=$(rustc -vV | sed -n 's/^host: //p')

tar_gnu() {
  local t
  for t in gtar tar; do
    if command -v "$t" >/dev/null && "$t" --version 2>/dev/null | grep -q 'GNU tar'; then
      echo "$t"
      return
    fi
  done
  die "GNU tar is needed to pack reproducible archives (on macOS: brew install gnu-tar)"
}

sha256() { # the sha256sum line format: "<hex>  <file>"
  if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

# build <package> <binary>: builds it for $target with $profile; prints the binary's directory.
build() {
  local dir=target
  [ -n "$target" ] && dir=target/$target
  case $profile in release) dir=$dir/release ;; dev) dir=$dir/debug ;; esac
  if [ "$profile" = dev ] && [ -x "$dir/$2" ]; then
    echo "$dir"
    return
  fi
  local cargo=(cargo build)
  if $auditable; then
    cargo auditable --version >/dev/null 2>&1 ||
      die "--auditable needs cargo-auditable (cargo install cargo-auditable --locked)"
    cargo=(cargo auditable build)
  fi
  [ "$profile" = release ] && cargo+=(--release --locked)
  [ -n "$target" ] && cargo+=(--target "$target")
  # ring (rustls's cryptography) compiles C for the target: for musl, with musl's compiler
  # wrapper (Debian's musl-tools) unless CC_<target> says otherwise.
  local cc_var
  cc_var=CC_$(tr '-' '_' <<<"$target")
  if [[ $target == *-linux-musl ]] && [ -z "${!cc_var:-}" ] && command -v musl-gcc >/dev/null; then
    export "$cc_var=musl-gcc"
  fi
  "${cargo[@]}" -p "$1" >&2
  echo "$dir"
}

# pack <dir> <archive>: the files of <dir>, at the top of the archive.
pack() {
  local tar
  tar=$(tar_gnu)
  (cd "$1" && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort |
    "$tar" --create --no-recursion --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
      --files-from=- | gzip -n) >"$out/$2"
  log "$out/$2"
}

cli() {
  local platform bin stage runner
  platform=$(platform_of "${target:-$host}")
  bin=$(build flow-cli flow)
  stage=$(mktemp -d)
  mkdir -p "$stage/completions"
  install -s -m 0755 "$bin/flow" "$stage/flow"
  # A musl build is static: it must name no program interpreter (dynamic loader) to need.
  if [[ $target == *-linux-musl ]] && readelf -l "$stage/flow" | grep -q 'program interpreter'; then
    die "the $target build of flow is not static: $(readelf -l "$stage/flow" | grep 'program interpreter')"
  fi
  ln -s flow "$stage/kubectl-flow"
  # The man page and completions are the same text for every platform: written by the binary
  # packed when it runs here, else by a build for this machine.
  runner=$bin/flow
  if ! "$runner" version >/dev/null 2>&1; then
    log "the $target binary does not run here; the man page and completions come from a build for $host"
    runner=$(target="" auditable=false build flow-cli flow)/flow
  fi
  "$runner" man >"$stage/flow.1"
  "$runner" completion bash >"$stage/completions/flow.bash"
  "$runner" completion zsh >"$stage/completions/_flow"
  "$runner" completion fish >"$stage/completions/flow.fish"
  install -m 0644 LICENSE "$stage/LICENSE"
  pack "$stage" "flow-$version-$platform.tar.gz"
  rm -rf "$stage"
}

operator() {
  local platform bin stage
  [ -z "$target" ] || die "the operator is built for this machine only (its image is built on each platform)"
  platform=$(platform_of "$host")
  case $platform in linux-*) ;; *) die "the operator runs on Linux only" ;; esac
  bin=$(build flow-operator flow-operator)
  stage=$(mktemp -d)
  install -s -m 0755 "$bin/flow-operator" "$stage/flow-operator"
  install -m 0644 LICENSE "$stage/LICENSE"
  pack "$stage" "flow-operator-$version-$platform.tar.gz"
  rm -rf "$stage"
}

manifests() {
  local archives archive platform sha
  # install.yaml: the CRD, then the operator's objects with the image named.
  grep -q '^          image: ankka-flow-operator:' deploy/operator.yaml ||
    die "deploy/operator.yaml names no ankka-flow-operator image"
  {
    echo "# Ankka Flow $version: the AnkkaFlow CRD and the operator. kubectl apply --server-side -f install.yaml"
    cat deploy/crd.yaml
    echo "---"
    sed "s|^          image: ankka-flow-operator:.*|          image: $image|" deploy/operator.yaml
  } >"$out/install.yaml"

  archives=$(cd "$out" && find . -maxdepth 1 -name "flow-$version-*-*.tar.gz" | sed 's|^\./||' | LC_ALL=C sort)
  [ -n "$archives" ] || die "no flow-$version-<os>-<arch>.tar.gz in $out: run scripts/dist.sh cli first"
  {
    cat <<KREW
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
KREW
    for archive in $archives; do
      platform=${archive#"flow-$version-"}
      platform=${platform%.tar.gz}
      sha=$(sha256 "$out/$archive" | cut -d' ' -f1)
      cat <<KREW
    - selector:
        matchLabels:
          os: ${platform%-*}
          arch: ${platform#*-}
      uri: $url/$archive
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
    done
  } >"$out/flow.krew.yaml"

  (cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort |
    while read -r f; do sha256 "$f"; done >SHA256SUMS)
  log "$(cd "$out" && ls | tr '\n' ' ')in $out"
}

case $command in
  cli) cli ;;
  operator) operator ;;
  manifests) manifests ;;
  all)
    [ -z "$target" ] || die "--target goes with scripts/dist.sh cli"
    # What an earlier run left (of another version too), and nothing else.
    rm -f "$out"/flow-*.tar.gz "$out"/install.yaml "$out"/flow.krew.yaml "$out"/SHA256SUMS
    cli
    operator
    manifests
    ;;
esac
