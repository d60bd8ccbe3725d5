#!/usr/bin/env bash
# Publishes the operator's image for several platforms as one: the OCI archives that
# scripts/image.sh built, one per platform (each built on its own platform), joined into one image
# index, and pushed with every image it lists. A pull then gets the image of the puller's platform.
#
#   scripts/image-publish.sh --to DEST [--digestfile FILE] ARCHIVE...
#
#   --to          where to push, as a transport and a reference: docker://ghcr.io/<owner>/ankka-flow-operator:<v>
#                 for a registry (credentials as buildah finds them: buildah login, or
#                 ~/.docker/config.json), oci:<dir>:<tag> for an OCI layout on disk
#   --digestfile  write the index's digest (sha256:...) there; it is printed on stdout too
#
# Refuses two archives of one platform. buildah's storage is private (a temporary directory), so
# the machine's container storage is left alone. Installs buildah and jq with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="" digestfile=""
archives=()
while [ $# -gt 0 ]; do
  case $1 in
    --to) dest=${2:?--to needs a value}; shift 2 ;;
    --digestfile) digestfile=${2:?--digestfile needs a value}; shift 2 ;;
    -*) echo "image-publish.sh: unknown argument $1" >&2; exit 2 ;;
    *) archives+=("$1"); shift ;;
  esac
done
[ -n "$dest" ] || { echo "image-publish.sh: --to is needed (docker://<registry>/<name>:<tag> or oci:<dir>:<tag>)" >&2; exit 2; }
[ "${#archives[@]}" -gt 0 ] || { echo "image-publish.sh: no archive given" >&2; exit 2; }
log() { printf '[image-publish] %s\n' "$*" >&2; }

if ! command -v buildah >/dev/null || ! command -v jq >/dev/null; then
  log "installing buildah and jq (apt-get)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah jq >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah jq >/dev/null
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
B=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
"${B[@]}" manifest create ankka-flow-operator-release >/dev/null
for archive in "${archives[@]}"; do
  [ -f "$archive" ] || { echo "image-publish.sh: no archive $archive" >&2; exit 1; }
  "${B[@]}" manifest add ankka-flow-operator-release "oci-archive:$archive" >/dev/null
done
# The platforms the index lists, each once.
platforms=$("${B[@]}" manifest inspect ankka-flow-operator-release |
  jq -r '.manifests[].platform | "\(.os)/\(.architecture)"' | sort)
dup=$(uniq -d <<<"$platforms")
[ -z "$dup" ] || { echo "image-publish.sh: more than one archive for $dup" >&2; exit 1; }
log "pushing $(tr '\n' ' ' <<<"$platforms")to $dest"
"${B[@]}" manifest push --all --digestfile "$work/digest" ankka-flow-operator-release "$dest" >/dev/null
digest=$(cat "$work/digest")
[ -z "$digestfile" ] || printf '%s\n' "$digest" >"$digestfile"
echo "$digest"
