#!/usr/bin/env bash
# Packages the Helm chart charts/ankka-flow for a release: its `image.repository` set to where the
# release's image is published, so that `helm install oci://...` pulls it without --set. Checks
# that the chart's version and appVersion are the workspace's (a chart installs the operator of
# its version). Prints the path of the package, ankka-flow-<version>.tgz; push it with
# `helm push <package> oci://<registry>/<owner>/charts`.
#
#   scripts/chart-package.sh --image-repository REPO [--out DIR]
#
#   --image-repository  e.g. ghcr.io/<owner>/ankka-flow-operator
#   --out               where to write the package (default target/dist)
#
# Runs Helm from $HELM (default scripts/helm.sh, which builds it when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="" out=target/dist
while [ $# -gt 0 ]; do
  case $1 in
    --image-repository) repo=${2:?--image-repository needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    *) echo "chart-package.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$repo" ] || { echo "chart-package.sh: --image-repository is needed" >&2; exit 2; }
case ${repo##*/} in
  *:* | *@*) echo "chart-package.sh: --image-repository is a repository without a tag or digest: $repo" >&2; exit 2 ;;
esac
helm=${HELM:-scripts/helm.sh}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
chart_version=$(sed -n 's/^version: *//p' charts/ankka-flow/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/ankka-flow/Chart.yaml)
if [ "$chart_version" != "$version" ] || [ "$app_version" != "$version" ]; then
  echo "chart-package.sh: charts/ankka-flow/Chart.yaml has version $chart_version and appVersion $app_version; the workspace is $version" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R charts/ankka-flow "$work/ankka-flow"
# The one `repository:` of the `image:` block, at the top of values.yaml.
n=$(grep -c '^  repository: ankka-flow-operator$' "$work/ankka-flow/values.yaml" || true)
[ "$n" = 1 ] || { echo "chart-package.sh: values.yaml has no single image.repository ankka-flow-operator" >&2; exit 1; }
sed -i.orig "s|^  repository: ankka-flow-operator\$|  repository: $repo|" "$work/ankka-flow/values.yaml"
rm -f "$work/ankka-flow/values.yaml.orig"
mkdir -p "$out"
"$helm" package "$work/ankka-flow" --destination "$out" >&2
echo "$(cd "$out" && pwd)/ankka-flow-$version.tgz"
