#!/usr/bin/env bash
# Create .venv and install txnlog (with the dev extra) when missing or when
# pyproject.toml changed since the last install; then make sure numba's cache
# holds the compiled decoders. Idempotent; sourced by the top-level commands so
# that each one does its own set-up on a fresh machine.
set -euo pipefail
TXNLOG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$TXNLOG_ROOT/.venv"
STAMP="$VENV/.txnlog-install-stamp"
BYTECODE_STAMP="$VENV/.txnlog-bytecode-stamp"
want="$(sha256sum "$TXNLOG_ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ]; then
  echo "txnlog: creating $VENV (first run only)" >&2
  python3 -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "txnlog: installing txnlog and its dependencies into $VENV (first run only, ~1-2 min)" >&2
  # With uv (pip's interface, the same packages): it fetches and unpacks in parallel, where pip does one at a
  # time (benchmarks/RESULTS.md, "Test suite time"). pip when uv cannot be had or fails (an index that only pip's
  # own configuration names).
  # The packages' bytecode is compiled below, beside numba's warm-up, not by the install itself.
  if ! { "$VENV/bin/python" -m pip install -q uv >&2 \
    && "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -e "$TXNLOG_ROOT[dev]" >&2; }
  then
    echo "txnlog: installing with pip instead" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e "$TXNLOG_ROOT[dev]" >&2
  fi
  echo "$want" > "$STAMP"
fi
# The warm-ups below (each a no-op when up to date) run in two lines at once, one per core on a 2-core machine:
# txnlog's bytecode, then numba's decoders, in the background; pyspark.zip's bytecode, then the installed packages',
# beside them. The JVM's class archive comes after both: its training run imports pyspark from that zip and runs
# the decoders.
warm_txnlog() {
  # txnlog's own bytecode, written here: an editable install leaves it to the first import, and a shell with
  # PYTHONDONTWRITEBYTECODE set would then compile every module from source in every process (the job, each Spark
  # Python worker, each test's subprocess). Only changed sources are compiled again.
  "$VENV/bin/python" -m compileall -q -j 0 "$TXNLOG_ROOT/txnlog" "$TXNLOG_ROOT/jobs" >/dev/null \
    || echo "txnlog: warning: could not write txnlog's bytecode; each run compiles it" >&2
  # Compile the decoders once, here, rather than in every Spark worker that starts before numba's
  # cache is written (benchmarks/RESULTS.md E3). The check is stdlib-only: it
  # compares a hash of the sources compiled code depends on, the interpreter and numba's version with
  # what the last warm-up recorded. It fails after an install, an upgrade or an edit of those sources.
  # TXNLOG_NO_WARMUP=1 skips it; a failed warm-up is only a warning (the workers then compile).
  if [ "${TXNLOG_NO_WARMUP:-0}" != 1 ] && ! "$VENV/bin/python" "$TXNLOG_ROOT/txnlog/kafka/jit.py" --is-warm; then
    echo "txnlog: compiling the decoders into numba's cache (after an install or an edit of txnlog/kafka; ~30 s)" >&2
    PYTHONPATH="$TXNLOG_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -c \
      "from txnlog.pipeline import warm_decoders; warm_decoders()" >&2 \
      || echo "txnlog: warning: could not pre-compile the decoders; Spark workers will compile them" >&2
  fi
}
warm_txnlog &
warming=$!
# pyspark.zip's modules compiled into it, once per pyspark install (txnlog/engine/spark/zip_bytecode.py): Spark
# starts each of its Python processes with that zip first on the path, and zipimport compiles from source otherwise.
if [ "${TXNLOG_NO_WARMUP:-0}" != 1 ] && ! "$VENV/bin/python" "$TXNLOG_ROOT/txnlog/engine/spark/zip_bytecode.py" --is-ready; then
  "$VENV/bin/python" "$TXNLOG_ROOT/txnlog/engine/spark/zip_bytecode.py" --create \
    || echo "txnlog: warning: could not compile pyspark.zip's modules; Spark's Python processes compile them" >&2
fi
# The installed packages' bytecode, once per install, on both cores while numba's warm-up holds one: with
# PYTHONDONTWRITEBYTECODE set (some shells and CI images set it), a venv without it compiles every module it
# imports in every process. compileall skips what is up to date; a file it cannot compile (a package's test data
# in an older syntax) is left to the import, as pip and uv leave it.
if [ ! -f "$BYTECODE_STAMP" ] || [ "$(cat "$BYTECODE_STAMP")" != "$want" ]; then
  "$VENV/bin/python" -m compileall -q -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    >/dev/null 2>&1 || true
  echo "$want" > "$BYTECODE_STAMP"
fi
wait "$warming" || true
unset -f warm_txnlog
unset warming BYTECODE_STAMP
# Record the driver JVM's classes once per JDK and Spark install (txnlog/engine/spark/jvm_archive.py): every
# later run's JVM maps them instead of loading Spark's jars again. TXNLOG_JVM_ARCHIVE=0 skips it.
if [ "${TXNLOG_NO_WARMUP:-0}" != 1 ] && ! "$VENV/bin/python" "$TXNLOG_ROOT/txnlog/engine/spark/jvm_archive.py" --is-ready; then
  echo "txnlog: recording the driver JVM's classes for faster starts (once per Spark install; ~1 min)" >&2
  PATH="$VENV/bin:$PATH" PYTHONPATH="$TXNLOG_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" \
    "$TXNLOG_ROOT/txnlog/engine/spark/jvm_archive.py" --create >&2 \
    || echo "txnlog: warning: could not record the JVM's classes; runs start ~4 s slower" >&2
fi
export PATH="$VENV/bin:$PATH"
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
