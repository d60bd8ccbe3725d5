#!/usr/bin/env bash
# Checks that a release tag names the version everything in the repository says, and prints
# `version=<version>` (the release workflow appends it to $GITHUB_OUTPUT). The tag is v<version>,
# where <version> is the workspace's (Cargo.toml); the chart's version and appVersion, and the
# image deploy/operator.yaml names, must be the same, so that the tag, the image, the chart and the
# archives of one release never disagree.
#
#   scripts/release-version.sh v0.1.0
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:?usage: scripts/release-version.sh v<version>}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
chart_version=$(sed -n 's/^version: *//p' charts/ankka-flow/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/ankka-flow/Chart.yaml)
deploy_version=$(sed -n 's/^ *image: ankka-flow-operator://p' deploy/operator.yaml)
problems=()
[ "$tag" = "v$version" ] || problems+=("the tag $tag is not v$version, the workspace's version (Cargo.toml)")
[ "$chart_version" = "$version" ] || problems+=("charts/ankka-flow/Chart.yaml has version $chart_version")
[ "$app_version" = "$version" ] || problems+=("charts/ankka-flow/Chart.yaml has appVersion $app_version")
[ "$deploy_version" = "$version" ] || problems+=("deploy/operator.yaml names ankka-flow-operator:$deploy_version")
if [ "${#problems[@]}" -gt 0 ]; then
  printf 'release-version.sh: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "version=$version"
