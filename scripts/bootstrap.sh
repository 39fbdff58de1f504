#!/usr/bin/env bash
# Create .venv and install txnlog (with the dev extra) when missing or when
# pyproject.toml changed since the last install. Idempotent; sourced by the
# top-level commands so that each one does its own set-up on a fresh machine.
set -euo pipefail
TXNLOG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$TXNLOG_ROOT/.venv"
STAMP="$VENV/.txnlog-install-stamp"
want="$(sha256sum "$TXNLOG_ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "txnlog: creating $VENV (first run only)" >&2
  python3 -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "txnlog: installing txnlog and its dependencies into $VENV (first run only, ~2 min)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q -e "$TXNLOG_ROOT[dev]" >&2
  echo "$want" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
