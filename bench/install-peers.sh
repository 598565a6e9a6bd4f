#!/bin/sh
# Install the systems rsandbox is compared with (Debian 12). Run as root.
# r-cran-data.table is optional (used only by the "growth" scenario).
set -eu
apt-get update
apt-get install -y --no-install-recommends r-cran-callr bubblewrap r-cran-matrix
apt-get install -y --no-install-recommends r-cran-data.table || echo "install-peers: r-cran-data.table not installed; the growth scenario will skip it"
