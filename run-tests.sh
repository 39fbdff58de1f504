#!/usr/bin/env bash
# Run txnlog's tests. Creates .venv and installs the project on first use.
# Extra arguments go to pytest, e.g. ./run-tests.sh -m slow  or  ./run-tests.sh tests/kafka
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
exec python -m pytest "$@"
