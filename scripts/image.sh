#!/usr/bin/env bash
# Builds the operator's container image here, without pulling any base image: a root filesystem
# holding the binary and exactly what it needs at run time (the shared libraries `ldd` names, a
# passwd/group entry for user 65532, the CA certificates, nsswitch.conf), committed FROM scratch
# with buildah. Nothing is run inside the image while building it, so no container runtime is
# needed. The registry-based recipe for users is the Containerfile at the repository root.
#
#   scripts/image.sh [--binary PATH] [--out DIR] [--tag NAME:TAG]
#
#   --binary   the flow-operator to put in (default: target/release/flow-operator, built if missing)
#   --out      where to write the image (default: target/image)
#   --tag      image name (default: ankka-flow-operator:<workspace version>)
#
# Writes <out>/rootfs/ (the staged files), <out>/<name>-<tag>.oci.tar (an OCI archive: load it with
# `podman load -i`, push it with `skopeo copy oci-archive:<file> docker://<registry>/<name>:<tag>`,
# or join the archives of several platforms into one multi-platform image with
# scripts/image-publish.sh) and <out>/image.env (NAME, TAG, ARCH, ARCHIVE, ROOTFS_BYTES,
# ARCHIVE_BYTES). The image is for the binary's architecture (amd64 or arm64), and carries the
# org.opencontainers.image.* labels: title, description, version, revision (the full git commit),
# created (the commit's time, so that the same commit builds the same image), source and url (the
# repository of Cargo.toml), documentation, licenses and vendor. buildah's storage is private, under <out>/storage,
# so the machine's container storage is left alone. Installs buildah with apt-get when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
binary=target/release/flow-operator out=target/image tag="ankka-flow-operator:$version"
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) echo "image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { printf '[image] %s\n' "$*" >&2; }

if ! command -v buildah >/dev/null; then
  log "installing buildah (apt-get)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null
  fi
fi
if [ ! -x "$binary" ]; then
  [ "$binary" = target/release/flow-operator ] || { echo "image.sh: $binary is not an executable" >&2; exit 1; }
  log "building $binary"
  cargo build --release -p flow-operator
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$out/rootfs
rm -rf "$root"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/var/lib/ankka-flow/ledger"
# Symbols stripped: a quarter of a release binary, of no use in the image.
install -s -m 0755 "$binary" "$root/usr/local/bin/flow-operator"

# Every shared library the binary loads, at the path the loader looks for it, and the loader
# (today glibc's libc and libm, and libgcc_s: OpenSSL, libcurl and zlib are linked in).
# glibc (2.34 and later) has the files and dns name services built in, so names resolve without
# NSS modules; nsswitch.conf says to use them.
libs=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[ -n "$libs" ] || { echo "image.sh: ldd found no libraries in $binary (a static binary?)" >&2; }
for lib in $libs; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
# /lib64 and /lib are links to /usr/lib64 and /usr/lib on merged-/usr systems; the loader path
# the binary names (PT_INTERP) must exist as written.
interp=$(readelf -l "$binary" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
if [ -n "$interp" ] && [ ! -e "$root$interp" ]; then
  mkdir -p "$root$(dirname "$interp")"
  cp -L "$interp" "$root$interp"
fi

cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
# TLS to Kafka brokers and OIDC endpoints verifies against the system's CA bundle.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
else
  log "no /etc/ssl/certs/ca-certificates.crt on this machine: the image has no CA bundle"
fi
chmod 1777 "$root/tmp"

B=(buildah --root "$out/storage" --runroot "$out/run" --storage-driver vfs)
name=${tag%:*} tagv=${tag##*:}
# The full commit when building from a git checkout, else the one the binary names.
commit=$(git rev-parse HEAD 2>/dev/null || "$root/usr/local/bin/flow-operator" --version 2>/dev/null | awk '{ print $NF }' || true)
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
repository=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n1)
# The architecture of the binary (ELF e_machine), named as container platforms name it.
case $(readelf -h "$binary" | sed -n 's/^ *Machine: *//p') in
  *X86-64*) arch=amd64 ;;
  *AArch64*) arch=arm64 ;;
  *) echo "image.sh: $binary is neither an x86-64 nor an AArch64 binary" >&2; exit 1 ;;
esac
c=$("${B[@]}" from scratch)
trap '"${B[@]}" rm "$c" >/dev/null 2>&1 || true' EXIT
"${B[@]}" copy "$c" "$root/" / >/dev/null
# The ledger directory belongs to the operator's user (a volume is mounted there in a pod).
"${B[@]}" copy --chown 65532:65532 "$c" "$root/var/lib/ankka-flow/" /var/lib/ankka-flow/ >/dev/null
"${B[@]}" config \
  --os linux \
  --arch "$arch" \
  --user 65532:65532 \
  --workingdir / \
  --entrypoint '["/usr/local/bin/flow-operator"]' \
  --env FLOW_LEDGER_DIR=/var/lib/ankka-flow/ledger \
  --port 9090 \
  --volume /var/lib/ankka-flow/ledger \
  --label org.opencontainers.image.title=ankka-flow-operator \
  --label org.opencontainers.image.description="The Ankka Flow operator: reconciles AnkkaFlow resources and rebuilds pipelines from the start" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$commit" \
  --label org.opencontainers.image.created="$created" \
  --label org.opencontainers.image.source="$repository" \
  --label org.opencontainers.image.url="$repository" \
  --label org.opencontainers.image.documentation="$repository/tree/v$version/docs" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.vendor="Ankka Flow" \
  "$c"
# Dated at the commit, layers and history included: the same commit and binary give the same image.
"${B[@]}" commit --quiet --timestamp "$epoch" "$c" "$tag" >/dev/null
archive=$out/${name##*/}-$tagv.oci.tar
rm -f "$archive"
"${B[@]}" push --quiet "$tag" "oci-archive:$archive:$tag"
size=$(du -sb "$root" | cut -f1)
cat >"$out/image.env" <<ENV
NAME=$name
TAG=$tagv
ARCH=$arch
ARCHIVE=$archive
ROOTFS_BYTES=$size
ARCHIVE_BYTES=$(stat -c %s "$archive")
ENV
log "image $tag: $(du -sh "$root" | cut -f1) unpacked, archive $(du -h "$archive" | cut -f1) at $archive"
