#!/usr/bin/env bash
# A real standalone HBase (master + region server + ZooKeeper in one JVM) and its Thrift1 server on
# 127.0.0.1:9090, from jars fetched with Maven (docker/hbase/pom.xml). No Docker, no tarball.
#
#   scripts/svc-hbase.sh install    java 17 + maven (apt-get if missing), jars into the cache
#   scripts/svc-hbase.sh start      start in the background, wait until happybase lists tables
#   scripts/svc-hbase.sh stop       stop Thrift, then the master; wait for both
#   scripts/svc-hbase.sh status     exit 0 when Thrift answers
#   scripts/svc-hbase.sh run        foreground (Procfile / honcho). When an HBase already answers on the
#                                   Thrift port (`make services`, `start`), or one is still booting there,
#                                   it attaches: waits for it, then stays in the foreground while the port
#                                   stays open, exits 1 when it goes away and 0 on TERM/INT (leaving that
#                                   HBase running). Otherwise it starts both JVMs as its children, stopped
#                                   together (TERM/INT, or either one dying)
#   scripts/svc-hbase.sh thrift-run PORT
#                                   a second Thrift server in the foreground on PORT (fault tests)
#
# Environment (all optional):
#   CRAWLFLEET_HBASE_DATA        data, config, logs, pid files   (/var/tmp/crawlfleet-hbase)
#   CRAWLFLEET_HBASE_CACHE       jar cache, outside the repo     (~/.cache/crawlfleet/hbase)
#   CRAWLFLEET_HBASE_THRIFT_PORT Thrift1 port                    (9090)
#   CRAWLFLEET_HBASE_THRIFT_BIND address Thrift listens on        (127.0.0.1). For fetch nodes on other
#                                machines, the ONE address of this machine they reach it by (the fleet's
#                                network; docs/SECURITY.md), never every address: 0.0.0.0 / :: are refused
#                                unless CRAWLFLEET_HBASE_THRIFT_ANY=1 says so explicitly. Thrift1 has no
#                                authentication of its own here: only the fleet's network may reach it.
#                                Also for thrift-run. ZooKeeper, master and region server stay on 127.0.0.1.
#   CRAWLFLEET_HBASE_ZK_PORT     ZooKeeper client port           (12181; avoids a system ZooKeeper)
#   CRAWLFLEET_HBASE_MASTER_PORT / CRAWLFLEET_HBASE_RS_PORT  RPC ports (16000 / 16020)
#   CRAWLFLEET_HBASE_TIMEOUT     seconds to wait for readiness   (240)
#   CRAWLFLEET_HBASE_HEAP        master (and region server) heap (2g)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
POM="$ROOT/docker/hbase/pom.xml"
DATA="${CRAWLFLEET_HBASE_DATA:-/var/tmp/crawlfleet-hbase}"
CACHE="${CRAWLFLEET_HBASE_CACHE:-$HOME/.cache/crawlfleet/hbase}"
THRIFT_PORT="${CRAWLFLEET_HBASE_THRIFT_PORT:-9090}"
THRIFT_BIND="${CRAWLFLEET_HBASE_THRIFT_BIND:-127.0.0.1}"
case "$THRIFT_BIND" in
  0.0.0.0|::|'[::]'|'')
    if [ "${CRAWLFLEET_HBASE_THRIFT_ANY:-0}" != 1 ]; then
      echo "svc-hbase: refusing to bind Thrift to '$THRIFT_BIND' (every address): give the fleet's address in" \
           "CRAWLFLEET_HBASE_THRIFT_BIND, or CRAWLFLEET_HBASE_THRIFT_ANY=1 if a firewall guards it (docs/SECURITY.md)" >&2
      exit 2
    fi ;;
esac
# Where this script checks Thrift: the bound address, or loopback when bound to every address.
THRIFT_HOST="$THRIFT_BIND"; [ "$THRIFT_BIND" = 0.0.0.0 ] && THRIFT_HOST=127.0.0.1
ZK_PORT="${CRAWLFLEET_HBASE_ZK_PORT:-12181}"
MASTER_PORT="${CRAWLFLEET_HBASE_MASTER_PORT:-16000}"
RS_PORT="${CRAWLFLEET_HBASE_RS_PORT:-16020}"
TIMEOUT="${CRAWLFLEET_HBASE_TIMEOUT:-240}"
# 2g, not 1g: the standalone JVM holds the region server, whose block cache and memstores take 0.4 + 0.4 of the
# heap by default. At 1g a long crawl kept the old generation ~80% full: G1 marked concurrently all the time
# (712 cycles, 12 full GCs) and GC threads were a third of HBase's CPU in a 100k-page fleet run (docs/bench/fleet.md).
HEAP="${CRAWLFLEET_HBASE_HEAP:-2g}"
CONF="$DATA/conf"
LOGS="$DATA/logs"
MASTER_PID="$DATA/master.pid"
THRIFT_PID="$DATA/thrift.pid"

log() { echo "svc-hbase: $*" >&2; }

# The jar set is keyed by the POM's checksum, so editing the POM fetches a fresh set.
pom_key() { sha256sum "$POM" | cut -c1-16; }
lib_dir() { echo "$CACHE/$(pom_key)/lib"; }

python_bin() {
  if [ -x "$ROOT/.venv/bin/python" ]; then echo "$ROOT/.venv/bin/python"; else command -v python3; fi
}

java_bin() {
  local j
  for j in /usr/lib/jvm/java-17-openjdk-*/bin/java; do
    [ -x "$j" ] && { echo "$j"; return; }
  done
  j="$(command -v java || true)"
  [ -n "$j" ] && "$j" -version 2>&1 | grep -Eq 'version "(1[7-9]|2[0-9])' && { echo "$j"; return; }
  return 1
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; }
}

# JDK 17 flags from HBase's own launcher (bin/hbase, hbase-env for JDK 11+).
JAVA_FLAGS=(
  -XX:+UseG1GC -Djava.net.preferIPv4Stack=true
  -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
  --add-modules jdk.unsupported
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.util.concurrent=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.security.jgss/sun.security.krb5=ALL-UNNAMED
  --add-exports java.base/sun.net.dns=ALL-UNNAMED --add-exports java.base/sun.net.util=ALL-UNNAMED
)

install() {
  if ! java_bin >/dev/null; then log "installing JDK 17"; apt_install openjdk-17-jre-headless; fi
  if ! command -v mvn >/dev/null; then log "installing maven"; apt_install maven; fi
  local lib; lib="$(lib_dir)"
  [ -f "$lib/.complete" ] && return 0
  mkdir -p "$CACHE"
  (
    flock 9  # two concurrent installs (CI matrix, parallel shells) fetch once
    [ -f "$lib/.complete" ] && exit 0
    log "fetching HBase jars from Maven Central into $lib"
    rm -rf "$lib.tmp"
    mvn -q -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$lib.tmp"
    rm -rf "$lib" && mv "$lib.tmp" "$lib" && touch "$lib/.complete"
  ) 9>"$CACHE/.lock"
}

write_conf() {
  mkdir -p "$CONF" "$LOGS" "$DATA/hbase" "$DATA/zk" "$DATA/tmp"
  cat >"$CONF/hbase-site.xml" <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>hbase.cluster.distributed</name><value>false</value></property>
  <property><name>hbase.rootdir</name><value>file://$DATA/hbase</value></property>
  <property><name>hbase.tmp.dir</name><value>$DATA/tmp</value></property>
  <property><name>hbase.zookeeper.quorum</name><value>127.0.0.1</value></property>
  <property><name>hbase.zookeeper.property.clientPort</name><value>$ZK_PORT</value></property>
  <property><name>hbase.zookeeper.property.dataDir</name><value>$DATA/zk</value></property>
  <property><name>hbase.unsafe.stream.capability.enforce</name><value>false</value></property>
  <property><name>hbase.master.info.port</name><value>-1</value></property>
  <property><name>hbase.regionserver.info.port</name><value>-1</value></property>
  <property><name>hbase.thrift.info.port</name><value>-1</value></property>
  <property><name>hbase.master.port</name><value>$MASTER_PORT</value></property>
  <property><name>hbase.regionserver.port</name><value>$RS_PORT</value></property>
  <property><name>hbase.master.hostname</name><value>127.0.0.1</value></property>
  <property><name>hbase.regionserver.hostname</name><value>127.0.0.1</value></property>
  <property><name>hbase.unsafe.regionserver.hostname</name><value>127.0.0.1</value></property>
  <property><name>hbase.master.ipc.address</name><value>127.0.0.1</value></property>
  <property><name>hbase.regionserver.ipc.address</name><value>127.0.0.1</value></property>
  <!-- One small machine: fewer handler threads, no periodic balancer/normalizer churn. -->
  <property><name>hbase.regionserver.handler.count</name><value>16</value></property>
  <property><name>hbase.balancer.period</name><value>3600000</value></property>
  <property><name>hbase.thrift.minWorkerThreads</name><value>4</value></property>
  <!-- The Thrift server's client reads the cluster id and meta's location from ZooKeeper with a 10 s
       default; on a 2-core box under load that read has timed out ("Zookeeper GET could not be
       completed in 10000 ms") and failed the request. A minute of margin; a dead ZooKeeper still fails. -->
  <property><name>zookeeper.registry.async.get.timeout</name><value>60000</value></property>
</configuration>
EOF
  cat >"$CONF/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = WARN,console
logger.hbase.name = org.apache.hadoop.hbase
logger.hbase.level = INFO
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
EOF
}

classpath() { echo "$CONF:$(lib_dir)/*"; }

java_cmd() {  # java_cmd HEAP MAIN ARGS...: sets the array JAVA_CMD
  local heap="$1"; shift
  local java; java="$(java_bin)" || { log "no JDK 17+; run: $0 install"; exit 1; }
  JAVA_CMD=("$java" -Xms64m "-Xmx$heap" "${JAVA_FLAGS[@]}" -Dlog4j2.configurationFile="$CONF/log4j2.properties"
    -Dhbase.log.dir="$LOGS" -cp "$(classpath)" "$@")
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

probe() {  # Thrift answers a real request (the port opens before the master is ready)
  "$(python_bin)" - "$THRIFT_PORT" "$THRIFT_HOST" <<'EOF' >/dev/null 2>&1
import sys
import happybase
conn = happybase.Connection(sys.argv[2], int(sys.argv[1]), timeout=5000, autoconnect=True)
conn.tables()
conn.close()
EOF
}

wait_ready() {
  local deadline=$((SECONDS + TIMEOUT))
  until probe; do
    if [ $SECONDS -ge $deadline ]; then
      log "not ready after ${TIMEOUT}s; last log lines:"; tail -n 30 "$LOGS/master.log" "$LOGS/thrift.log" >&2 || true
      return 1
    fi
    if ! alive "$MASTER_PID"; then log "master died:"; tail -n 40 "$LOGS/master.log" >&2; return 1; fi
    sleep 2
  done
}

start() {
  if probe; then log "already running (thrift on $THRIFT_HOST:$THRIFT_PORT)"; return 0; fi
  install
  write_conf
  if ! alive "$MASTER_PID"; then
    log "starting master (data in $DATA)"
    # setsid: the JVMs outlive the shell (and the test session) that started them.
    java_cmd "$HEAP" org.apache.hadoop.hbase.master.HMaster start
    setsid nohup "${JAVA_CMD[@]}" >"$LOGS/master.log" 2>&1 </dev/null &
    echo $! >"$MASTER_PID"
  fi
  if ! alive "$THRIFT_PID"; then
    log "starting thrift on $THRIFT_BIND:$THRIFT_PORT"
    java_cmd 256m org.apache.hadoop.hbase.thrift.ThriftServer -b "$THRIFT_BIND" -p "$THRIFT_PORT" start
    setsid nohup "${JAVA_CMD[@]}" >"$LOGS/thrift.log" 2>&1 </dev/null &
    echo $! >"$THRIFT_PID"
  fi
  wait_ready
  log "ready in ${SECONDS}s"
}

stop_pid() {  # stop_pid PIDFILE NAME: TERM, wait up to 60 s, then KILL
  local f="$1" name="$2" pid i
  alive "$f" || { rm -f "$f"; return 0; }
  pid="$(cat "$f")"
  log "stopping $name ($pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then log "$name did not stop; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$f"
}

stop() {
  stop_pid "$THRIFT_PID" thrift
  stop_pid "$MASTER_PID" master
}

port_open() { (exec 3<>"/dev/tcp/$THRIFT_HOST/$THRIFT_PORT") 2>/dev/null; }

# A pid file whose process is one of our JVMs (a pid file left by a killed run may name a reused pid).
jvm_alive() { alive "$1" && grep -qa org.apache.hadoop.hbase "/proc/$(cat "$1")/cmdline" 2>/dev/null; }

NAP_PID=""
nap() { sleep "$1" & NAP_PID=$!; wait "$NAP_PID" || true; # A pid file whose process is one of our JVMs (a pid file left by a killed run may name a reused pid).
jvm_alive() { alive "$1" && grep -qa org.apache.hadoop.hbase "/proc/$(cat "$1")/cmdline" 2>/dev/null; }

NAP_PID=""; }  # a sleep a trap can cut short

attach() {  # an HBase we did not start answers: stay in the foreground while its Thrift port is open
  log "already running (thrift on $THRIFT_HOST:$THRIFT_PORT); attached, watching it"
  trap 'log "detached; the HBase on $THRIFT_HOST:$THRIFT_PORT keeps running"; [ -z "$NAP_PID" ] || kill "$NAP_PID" 2>/dev/null; exit 0' TERM INT
  while port_open; do nap 5; done
  log "the HBase on $THRIFT_HOST:$THRIFT_PORT went away (thrift port closed)"
  exit 1
}

run() {  # foreground for honcho: attach to a running HBase, or run both JVMs as children
  if probe; then attach; fi
  if port_open || jvm_alive "$MASTER_PID" || jvm_alive "$THRIFT_PID"; then
    # Another HBase is booting (`svc-hbase.sh start` in another shell): wait for it, never start a second.
    log "an HBase is starting (thrift port $THRIFT_PORT open or a pid in $DATA alive); waiting up to ${TIMEOUT}s"
    trap 'exit 0' TERM INT
    local deadline=$((SECONDS + TIMEOUT))
    until probe; do
      if [ $SECONDS -ge $deadline ]; then log "it is not ready after ${TIMEOUT}s; giving up"; exit 1; fi
      if ! port_open && ! jvm_alive "$MASTER_PID" && ! jvm_alive "$THRIFT_PID"; then
        log "it went away before it was ready; see $LOGS"; exit 1
      fi
      nap 3
    done
    trap - TERM INT
    attach
  fi
  install
  write_conf
  log "starting master and thrift in the foreground (data in $DATA; thrift on $THRIFT_BIND:$THRIFT_PORT)"
  java_cmd "$HEAP" org.apache.hadoop.hbase.master.HMaster start
  "${JAVA_CMD[@]}" &
  echo $! >"$MASTER_PID"
  java_cmd 256m org.apache.hadoop.hbase.thrift.ThriftServer -b "$THRIFT_BIND" -p "$THRIFT_PORT" start
  "${JAVA_CMD[@]}" &
  echo $! >"$THRIFT_PID"
  trap 'stop; exit 0' TERM INT
  # Poll rather than `wait`: the master needs ~30 s to exit on TERM, and stop() waits for it.
  local ready=0 next_probe=0
  while alive "$MASTER_PID" && alive "$THRIFT_PID"; do
    # Say once when it serves requests; probe (a Python start) at most every 5 s, only once the port is open.
    if [ "$ready" = 0 ] && [ $SECONDS -ge $next_probe ] && port_open; then
      next_probe=$((SECONDS + 5))
      if probe; then ready=1; log "ready in ${SECONDS}s (thrift on $THRIFT_BIND:$THRIFT_PORT)"; fi
    fi
    sleep 1
  done
  log "a JVM exited; stopping the other"
  stop
  exit 1
}

thrift_run() {  # a separate Thrift server on another port, same master; replaced by exec
  local port="${1:?usage: $0 thrift-run PORT}"
  [ -f "$CONF/hbase-site.xml" ] || write_conf
  java_cmd 256m org.apache.hadoop.hbase.thrift.ThriftServer -b "$THRIFT_BIND" -p "$port" start
  exec "${JAVA_CMD[@]}"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) if probe; then echo "hbase: up (thrift $THRIFT_HOST:$THRIFT_PORT)"; else echo "hbase: down"; exit 1; fi ;;
  run) run ;;
  thrift-run) thrift_run "${2:-}" ;;
  *) echo "usage: $0 install|start|stop|status|run|thrift-run PORT" >&2; exit 2 ;;
esac
