#!/bin/sh
# The bench's peers (callr, bubblewrap, Matrix, data.table) come with everything else.
exec "$(dirname "$0")/../scripts/install-deps.sh"
