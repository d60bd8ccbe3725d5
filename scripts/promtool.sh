#!/usr/bin/env bash
# Runs Prometheus's promtool (checks and unit tests of alerting rules), installing Debian's
# `prometheus` package with apt-get the first time it is missing, as scripts/image.sh does buildah.
# The package's server is not started (nothing here needs it).
#
#   scripts/promtool.sh <promtool arguments>...   e.g. scripts/promtool.sh check rules charts/ankka-flow/files/alerts.yaml
set -euo pipefail
if ! command -v promtool >/dev/null; then
  printf '[promtool] installing Debian'"'"'s prometheus package (apt-get)\n' >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
fi
exec promtool "$@"
