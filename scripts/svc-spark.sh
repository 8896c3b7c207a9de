#!/usr/bin/env bash
# Spark standalone: one master and one worker, from the pyspark wheel (its bin/spark-class and jars;
# the [spark] extra, which `make test` installs and `install` below too), no download of its own.
#
#   scripts/svc-spark.sh install   pyspark (the [spark] extra, from PyPI, if missing) and a JDK (from apt only
#                                  if missing)
#   scripts/svc-spark.sh start     start master and worker in the background, wait until the master's
#                                  JSON lists an ALIVE worker; daemons running from a pyspark that is gone
#                                  (started from a checkout since deleted) are restarted from this one's
#   scripts/svc-spark.sh stop      stop the worker and the master this script started
#   scripts/svc-spark.sh status    exit 0 when the master answers with an ALIVE worker and their pyspark is there
#   scripts/svc-spark.sh run       foreground (Procfile / honcho): attach to a master that already answers
#                                  (exit 1 when it goes away, 0 on TERM/INT, leaving it running), else run
#                                  both as children, stopped together
#
# Why standalone, not Spark on YARN: one light JVM pair (~2 x 150 MB idle) beside the four Hadoop daemons
# on a 2-core machine; an application starts its executors at once instead of negotiating an application
# master container with YARN first; and it needs no HDFS staging (spark.yarn.archive, the driver's jars
# and files uploaded per application). The link jobs on YARN are mrjob's hadoop runner.
#
# A driver (mrjob's spark runner: `-r spark --spark-master spark://HOST:7077`) must be reachable by the
# executors: jobs/runner.py sets spark.driver.host to the source address of the driver's route to the
# master (jobs/cluster.py driver_host), so a driver in a network namespace gives its own address there.
#
# Addresses and ports (scripts/lib-cluster.sh): the master and worker listen on CRAWLFLEET_CLUSTER_ADDR
# (127.0.40.1; SPARK_LOCAL_IP, so the web UIs and executors bind there too) and advertise
# CRAWLFLEET_SPARK_HOST (the same by default):
#   master 7077 (spark://HOST:7077), master web UI + JSON 7080 (http://HOST:7080/json/; not 8080, which
#   the testbed uses), worker 7078, worker web UI 7081; the REST submission server is off.
#   CRAWLFLEET_SPARK_{MASTER,MASTER_WEB,WORKER,WORKER_WEB}_PORT override them.
# Sizing: CRAWLFLEET_SPARK_WORKER_CORES (2) and CRAWLFLEET_SPARK_WORKER_MEMORY (1g: one executor of
# Spark's default 1g), daemon heaps CRAWLFLEET_SPARK_DAEMON_MEMORY (256m).
# State: $CRAWLFLEET_STATE_DIR/spark (the worker's application directories, cleaned after an hour; logs;
# pid files); CRAWLFLEET_SPARK_DATA overrides. CRAWLFLEET_SPARK_TIMEOUT: readiness wait (120 s).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SVC=spark
# shellcheck source=scripts/lib-cluster.sh
. "$ROOT/scripts/lib-cluster.sh"

ADDR="$CLUSTER_ADDR"
check_bind "$ADDR"
HOST="${CRAWLFLEET_SPARK_HOST:-$ADDR}"
if [ "$HOST" = 0.0.0.0 ]; then log "listening on every address: set CRAWLFLEET_SPARK_HOST to this machine's name"; exit 2; fi
MASTER_PORT="${CRAWLFLEET_SPARK_MASTER_PORT:-7077}"
MASTER_WEB_PORT="${CRAWLFLEET_SPARK_MASTER_WEB_PORT:-7080}"
WORKER_PORT="${CRAWLFLEET_SPARK_WORKER_PORT:-7078}"
WORKER_WEB_PORT="${CRAWLFLEET_SPARK_WORKER_WEB_PORT:-7081}"
CORES="${CRAWLFLEET_SPARK_WORKER_CORES:-2}"
MEMORY="${CRAWLFLEET_SPARK_WORKER_MEMORY:-1g}"
DAEMON_MEMORY="${CRAWLFLEET_SPARK_DAEMON_MEMORY:-256m}"
DATA="${CRAWLFLEET_SPARK_DATA:-$STATE_ROOT/spark}"
TIMEOUT="${CRAWLFLEET_SPARK_TIMEOUT:-120}"
MASTER_URL="spark://$HOST:$MASTER_PORT"
JSON="http://$HOST:$MASTER_WEB_PORT/json/"
MASTER_PID="$DATA/master.pid"
WORKER_PID="$DATA/worker.pid"

python_bin() {
  if [ -x "$ROOT/.venv/bin/python" ]; then echo "$ROOT/.venv/bin/python"; else command -v python3; fi
}

spark_home() {
  "$(python_bin)" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null \
    || { log "pyspark is not installed: pip install 'crawlfleet[spark]' (make .venv/.installed)"; exit 1; }
}

install() {
  need_tools_java_only
  if ! "$(python_bin)" -c 'import pyspark' 2>/dev/null; then
    # pyproject.toml's [spark] extra (`make demo`'s base install leaves it out; `make test` has it).
    local spec
    spec="$("$(python_bin)" -c 'import sys, tomllib; print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["spark"]))' "$ROOT/pyproject.toml")"
    log "installing $spec from PyPI"
    # shellcheck disable=SC2086  # a list of requirement specifiers
    "$(python_bin)" -m pip install -q $spec
  fi
  local home; home="$(spark_home)"
  [ -x "$home/bin/spark-class" ] || { log "no bin/spark-class in $home"; exit 1; }
  log "pyspark in $home ($(ls "$home"/jars/spark-core_*.jar | sed 's/.*spark-core_//; s/\.jar//'))"
}

need_tools_java_only() {  # a JDK only (no maven here); never upgrade one under running JVMs
  java_bin >/dev/null && return 0
  log "installing openjdk-17-jre-headless"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q openjdk-17-jre-headless >/dev/null; }
}

daemon_env() {  # the environment spark-class reads for both daemons (and the worker hands its executors)
  local home; home="$(spark_home)"
  mkdir -p "$DATA/work" "$DATA/logs" "$DATA/conf"
  DAEMON_ENV=(env SPARK_HOME="$home" SPARK_CONF_DIR="$DATA/conf" SPARK_LOCAL_IP="$ADDR" SPARK_PUBLIC_DNS="$HOST"
    JAVA_HOME="$(java_home)" PYSPARK_PYTHON="$(python_bin)"
    SPARK_DAEMON_MEMORY="$DAEMON_MEMORY" SPARK_DAEMON_JAVA_OPTS="-Xms32m ${SMALL_JVM[*]}"
    SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false"
    SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=600 -Dspark.worker.cleanup.appDataTtl=3600"
    SPARK_WORKER_DIR="$DATA/work")
  CLASS_BIN="$home/bin/spark-class"
}

master_cmd() {
  daemon_env
  CMD=("${DAEMON_ENV[@]}" "$CLASS_BIN" org.apache.spark.deploy.master.Master
    --host "$HOST" --port "$MASTER_PORT" --webui-port "$MASTER_WEB_PORT")
}

worker_cmd() {
  daemon_env
  CMD=("${DAEMON_ENV[@]}" "$CLASS_BIN" org.apache.spark.deploy.worker.Worker
    --host "$HOST" --port "$WORKER_PORT" --webui-port "$WORKER_WEB_PORT"
    --cores "$CORES" --memory "$MEMORY" --work-dir "$DATA/work" "$MASTER_URL")
}

answers() { curl -sf -m 5 "$JSON" >/dev/null 2>&1; }
ready() { curl -sf -m 5 "$JSON" 2>/dev/null | grep -q '"state" *: *"ALIVE"'; }

wait_ready() {
  local deadline=$((SECONDS + TIMEOUT))
  until ready; do
    if [ $SECONDS -ge $deadline ]; then log "no ALIVE worker after ${TIMEOUT}s"; tail -n 20 "$DATA/logs/"*.out >&2; return 1; fi
    alive "$MASTER_PID" || { log "the master died:"; tail -n 30 "$DATA/logs/master.out" >&2; return 1; }
    alive "$WORKER_PID" || { log "the worker died:"; tail -n 30 "$DATA/logs/worker.out" >&2; return 1; }
    sleep 1
  done
}

stale_home() {  # the running daemons' pyspark is gone (started from a checkout since deleted): its worker
  # could start no executor, though the master still answers with an ALIVE worker
  [ -s "$DATA/home" ] && [ ! -d "$(cat "$DATA/home")/jars" ]
}

start() {
  start_lock "$DATA"
  if ready && stale_home; then
    log "the running daemons' pyspark ($(cat "$DATA/home")) is gone: restarting them from this checkout's"
    stop
  fi
  if ready; then log "already running ($MASTER_URL, $JSON)"; return 0; fi
  install >/dev/null
  spark_home >"$DATA/home"
  if ! pid_is "$MASTER_PID" deploy.master.Master; then
    master_cmd
    spawn "$MASTER_PID" "$DATA/logs/master.out" "${CMD[@]}"
  fi
  if ! pid_is "$WORKER_PID" deploy.worker.Worker; then
    worker_cmd
    spawn "$WORKER_PID" "$DATA/logs/worker.out" "${CMD[@]}"
  fi
  wait_ready
  log "ready in ${SECONDS}s ($MASTER_URL, $JSON; worker $CORES cores, $MEMORY)"
}

stop() {
  stop_pid "$WORKER_PID" worker
  stop_pid "$MASTER_PID" master
}

run() {
  if answers; then attach "the Spark master on $MASTER_URL" answers; fi
  install >/dev/null
  spark_home >"$DATA/home"
  master_cmd
  "${CMD[@]}" >"$DATA/logs/master.out" 2>&1 &
  echo $! >"$MASTER_PID"
  worker_cmd
  "${CMD[@]}" >"$DATA/logs/worker.out" 2>&1 &
  echo $! >"$WORKER_PID"
  log "master and worker in the foreground ($MASTER_URL; logs in $DATA/logs)"
  trap 'stop; exit 0' TERM INT
  local said=0
  while alive "$MASTER_PID" && alive "$WORKER_PID"; do
    if [ "$said" = 0 ] && ready; then said=1; log "ready in ${SECONDS}s"; fi
    nap 2
  done
  log "a daemon exited; stopping the other"
  stop
  exit 1
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) if ready && stale_home; then echo "spark: stale (its pyspark $(cat "$DATA/home") is gone; start restarts it)"; exit 1
          elif ready; then echo "spark: up ($MASTER_URL, $JSON)"; else echo "spark: down"; exit 1; fi ;;
  run) run ;;
  *) echo "usage: $0 install|start|stop|status|run" >&2; exit 2 ;;
esac
