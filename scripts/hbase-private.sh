#!/usr/bin/env bash
# A PRIVATE standalone HBase for fault trials: its own data directory (hbase.rootdir, WAL, ZooKeeper
# data) and its own ports, so a trial may SIGKILL the JVM that holds the data without touching the
# shared HBase of scripts/svc-hbase.sh (which this script never starts, stops or reconfigures).
# Each command runs ONE JVM in the foreground (exec), so the caller owns it by pid and can kill -9 it.
#
#   scripts/hbase-private.sh master-run   HMaster (master + region server + ZooKeeper in one JVM)
#   scripts/hbase-private.sh thrift-run   the Thrift1 server over that master
#   scripts/hbase-private.sh conf         write DATA/conf only
#
# Environment (required: DATA and every port; the caller picks free ports):
#   HBASE_PRIVATE_DATA        data, config, logs
#   HBASE_PRIVATE_ZK_PORT / HBASE_PRIVATE_MASTER_PORT / HBASE_PRIVATE_RS_PORT / HBASE_PRIVATE_THRIFT_PORT
#   HBASE_PRIVATE_HEAP        master heap (1g)
#   HBASE_PRIVATE_THRIFT_BIND the address Thrift listens on (127.0.0.1; never every address: 0.0.0.0 and ::
#                             are refused, as in scripts/svc-hbase.sh)
# The jars are the shared cache that `scripts/svc-hbase.sh install` fills (installed on demand here).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
POM="$ROOT/docker/hbase/pom.xml"
CACHE="${CRAWLFLEET_HBASE_CACHE:-$HOME/.cache/crawlfleet/hbase}"
DATA="${HBASE_PRIVATE_DATA:?HBASE_PRIVATE_DATA is required}"
ZK_PORT="${HBASE_PRIVATE_ZK_PORT:?}"
MASTER_PORT="${HBASE_PRIVATE_MASTER_PORT:?}"
RS_PORT="${HBASE_PRIVATE_RS_PORT:?}"
THRIFT_PORT="${HBASE_PRIVATE_THRIFT_PORT:?}"
HEAP="${HBASE_PRIVATE_HEAP:-1g}"
THRIFT_BIND="${HBASE_PRIVATE_THRIFT_BIND:-127.0.0.1}"
case "$THRIFT_BIND" in
  0.0.0.0|::|'[::]'|'') echo "hbase-private: refusing to bind Thrift to every address ('$THRIFT_BIND')" >&2; exit 2 ;;
esac
CONF="$DATA/conf"

lib_dir() { echo "$CACHE/$(sha256sum "$POM" | cut -c1-16)/lib"; }

java_bin() {
  local j
  for j in /usr/lib/jvm/java-17-openjdk-*/bin/java; do [ -x "$j" ] && { echo "$j"; return; }; done
  command -v java
}

write_conf() {
  mkdir -p "$CONF" "$DATA/logs" "$DATA/hbase" "$DATA/zk" "$DATA/tmp"
  # The same settings as scripts/svc-hbase.sh (the trial tests what the dev stack runs), except the
  # directories, the ports and a short ZooKeeper session: after a kill -9 the restarted master gives
  # up on its dead predecessor's region server in seconds, not the default 90 s.
  cat >"$CONF/hbase-site.xml" <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>hbase.cluster.distributed</name><value>false</value></property>
  <property><name>hbase.rootdir</name><value>file://$DATA/hbase</value></property>
  <property><name>hbase.tmp.dir</name><value>$DATA/tmp</value></property>
  <property><name>hbase.zookeeper.quorum</name><value>127.0.0.1</value></property>
  <property><name>hbase.zookeeper.property.clientPort</name><value>$ZK_PORT</value></property>
  <property><name>hbase.zookeeper.property.dataDir</name><value>$DATA/zk</value></property>
  <property><name>zookeeper.session.timeout</name><value>6000</value></property>
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
  <property><name>hbase.regionserver.handler.count</name><value>16</value></property>
  <property><name>hbase.balancer.period</name><value>3600000</value></property>
  <property><name>hbase.thrift.minWorkerThreads</name><value>4</value></property>
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

run_jvm() {  # run_jvm HEAP MAIN ARGS...: replaces this shell
  local heap="$1"; shift
  [ -f "$(lib_dir)/.complete" ] || "$ROOT/scripts/svc-hbase.sh" install
  [ -f "$CONF/hbase-site.xml" ] || write_conf
  exec "$(java_bin)" -Xms64m "-Xmx$heap" "${JAVA_FLAGS[@]}" -Dlog4j2.configurationFile="$CONF/log4j2.properties" \
    -Dhbase.log.dir="$DATA/logs" -cp "$CONF:$(lib_dir)/*" "$@"
}

case "${1:-}" in
  conf) write_conf ;;
  master-run) run_jvm "$HEAP" org.apache.hadoop.hbase.master.HMaster start ;;
  thrift-run) run_jvm 256m org.apache.hadoop.hbase.thrift.ThriftServer -b "$THRIFT_BIND" -p "$THRIFT_PORT" start ;;
  *) echo "usage: $0 conf|master-run|thrift-run (see the header for the environment)" >&2; exit 2 ;;
esac
