#!/usr/bin/env bash
# ./spark-submit.sh [spark options] [job options]
#
# Runs jobs/find_hanging.py through spark-submit (local mode unless --master is
# given). Spark's own options (--master, --conf, --driver-memory, ...) pass
# through to spark-submit; everything else goes to the job. With no job input
# it analyses the embedded sample cluster and writes Delta tables to ./out/.
# Creates .venv and installs txnlog on first use. ./spark-submit.sh --help
# explains the job options.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$ROOT/scripts/bootstrap.sh"

# spark-submit options that take a value, and those that do not
with_value=" --master --deploy-mode --class --name --jars --packages --exclude-packages --repositories
 --py-files --files --archives --conf -c --properties-file --driver-memory --driver-java-options
 --driver-library-path --driver-class-path --driver-cores --executor-memory --executor-cores
 --total-executor-cores --num-executors --queue --principal --keytab --proxy-user "
with_value=" $(echo $with_value) "  # one space between names, also where the lines break
flags=" --verbose -v --supervise "
spark_args=()
job_args=()
master_given=0
# The driver JVM's JIT and collector: C1 only and the serial GC leave the CPU to the Python workers that
# decode (txnlog/engine/spark/session.py DRIVER_JAVA_OPTIONS says why; benchmarks/RESULTS.md §2 measured it).
# Your own --driver-java-options or --conf spark.driver.extraJavaOptions=... replaces these.
driver_java_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
own_java_options=0
while [ $# -gt 0 ]; do
  arg="$1"; name="${arg%%=*}"
  if [[ "$with_value" == *" $name "* ]]; then
    [ "$name" = "--master" ] && master_given=1
    if [[ "$arg" == *=* ]]; then value="${arg#*=}"; shift
    else
      if [ $# -lt 2 ]; then echo "spark-submit.sh: $arg needs a value" >&2; exit 2; fi
      value="$2"; shift 2
    fi
    # the driver's JVM options are merged with the log4j setting below instead of replacing it
    if [ "$name" = "--driver-java-options" ]; then driver_java_options="$value"; own_java_options=1
    elif [[ ( "$name" = "--conf" || "$name" = "-c" ) && "$value" == spark.driver.extraJavaOptions=* ]]; then
      driver_java_options="${value#spark.driver.extraJavaOptions=}"; own_java_options=1
    else spark_args+=("$name" "$value")
    fi
  elif [[ "$flags" == *" $arg "* ]]; then
    spark_args+=("$arg"); shift
  else
    case "$arg" in -h|--help) exec python "$ROOT/jobs/find_hanging.py" --help ;; esac
    job_args+=("$arg"); shift
  fi
done
# Arrow's allocator: jemalloc gives the pages txnlog's threads free back after about a second, where pyarrow's
# default (mimalloc) keeps them for reuse; on the 4.6 GiB hot mix the driver peaked ~130 MB lower and ran ~1 s
# faster (benchmarks/RESULTS.md §2). Set before any Python starts, for the driver and Spark's Python workers;
# your own ARROW_DEFAULT_MEMORY_POOL wins. Linux only: where a wheel lacks jemalloc, Arrow would warn.
if [ "$(uname -s)" = Linux ]; then export ARROW_DEFAULT_MEMORY_POOL="${ARROW_DEFAULT_MEMORY_POOL:-jemalloc}"; fi
executor_env=()
[ -n "${ARROW_DEFAULT_MEMORY_POOL:-}" ] && executor_env=(--conf "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL=$ARROW_DEFAULT_MEMORY_POOL")
# numba's cache of the compiled decoders: a NUMBA_CACHE_DIR of yours is the executors' too, so the daemon that
# forks their Python workers loads what scripts/bootstrap.sh compiled there (txnlog/engine/spark/worker_daemon.py)
[ -n "${NUMBA_CACHE_DIR:-}" ] && executor_env+=(--conf "spark.executorEnv.NUMBA_CACHE_DIR=$NUMBA_CACHE_DIR")
# Check the job's input and configuration before starting a JVM: a wrong path or
# an unknown config key fails at once, with one line that says what to fix.
if [ ${#spark_args[@]} -eq 0 ] && [ "$own_java_options" = 0 ]; then
  # No Spark option given: a small input (--driver-max-bytes) is read, built and written by this Python
  # process, no JVM started; a large one answers 10 and goes on to spark-submit.
  rc=0; python "$ROOT/jobs/find_hanging.py" --here-if-small ${job_args[@]+"${job_args[@]}"} || rc=$?
  [ "$rc" = 10 ] || exit "$rc"
else
  python "$ROOT/jobs/find_hanging.py" --validate-only ${job_args[@]+"${job_args[@]}"} || exit $?
fi
[ "$master_given" = 1 ] || spark_args+=(--master "local[*]")
# With txnlog's own JVM options, the driver also maps the archive of Spark's classes that
# scripts/bootstrap.sh recorded (txnlog/engine/spark/jvm_archive.py: ~4 s off a cold start).
if [ "$own_java_options" = 0 ]; then
  driver_java_options="$driver_java_options $(python "$ROOT/txnlog/engine/spark/jvm_archive.py" --options)"
fi

# Spark's progress bars help a person at a terminal and clutter cron logs.
progress=false; [ -t 2 ] && progress=true
exec spark-submit \
  --conf "spark.ui.showConsoleProgress=$progress" \
  --conf spark.sql.session.timeZone=UTC \
  --conf spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS \
  --conf "spark.pyspark.python=$PYSPARK_PYTHON" \
  --conf "spark.pyspark.driver.python=$PYSPARK_DRIVER_PYTHON" \
  --conf "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:$ROOT/conf/log4j2.properties $driver_java_options" \
  ${executor_env[@]+"${executor_env[@]}"} \
  ${spark_args[@]+"${spark_args[@]}"} \
  "$ROOT/jobs/find_hanging.py" ${job_args[@]+"${job_args[@]}"}
