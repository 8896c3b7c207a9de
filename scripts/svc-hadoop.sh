#!/usr/bin/env bash
# Hadoop, pseudo-distributed: HDFS (NameNode, DataNode) and YARN (ResourceManager, NodeManager with
# MapReduce's shuffle service), four JVMs started from Hadoop's jars on Maven Central
# (docker/hadoop/pom.xml); plus the local mode (no daemons) for callers that ask for it.
#
#   install  jars into the cache, the launchers and both configurations into $CRAWLFLEET_HADOOP_HOME
#   start    format the NameNode once, start the four daemons in the background, wait until ready:
#            a real HDFS write and read back through WebHDFS, and a RUNNING node in the
#            ResourceManager's node list (the REST form of `yarn node -list`)
#   stop     stop the daemons this script started (NodeManager, ResourceManager, DataNode, NameNode)
#   status   exit 0 when HDFS and YARN answer
#   run      foreground (Procfile / honcho): attach to daemons that already answer (exit 1 when they go
#            away, 0 on TERM/INT, leaving them running), else run the four as children, stopped together
#
# $CRAWLFLEET_HADOOP_HOME (~/.cache/crawlfleet/hadoop-cluster) holds:
#   bin/hadoop  version | fs | dfs | jar | classpath | getconf  (what mrjob's hadoop runner calls)
#   bin/hdfs    dfs | dfsadmin | getconf | namenode | datanode | classpath
#   bin/yarn    node | application | logs | rmadmin | resourcemanager | nodemanager | classpath
#   bin/mapred  job | classpath
#   bin/hadoop-local   `hadoop` with the local-mode configuration (fs.defaultFS=file:///,
#                      mapreduce.framework.name=local): no daemons needed
#   etc/hadoop (the cluster), etc/local (local mode); HADOOP_CONF_DIR overrides which one a launcher reads.
# jobs/hadoop.py turns this into mrjob arguments (YARN when the daemons answer, else local mode).
#
# Addresses and ports (scripts/lib-cluster.sh): every daemon listens on CRAWLFLEET_CLUSTER_ADDR
# (127.0.40.1) and advertises CRAWLFLEET_HADOOP_HOST (the same address by default): the NameNode's
# WebHDFS redirects send clients to the DataNode at that name, mappers read blocks from it, so a client on
# another machine (a network namespace routing 127.0.40.0/24 here, or a real host naming this machine)
# reaches every step. With CRAWLFLEET_CLUSTER_ADDR=0.0.0.0 (and CRAWLFLEET_CLUSTER_ANY=1), set
# CRAWLFLEET_HADOOP_HOST to the name or address the other machines use for this one.
#   NameNode RPC 8020 (fs.defaultFS hdfs://HOST:8020), NameNode HTTP + WebHDFS 9870,
#   DataNode data 9866, HTTP (WebHDFS data) 9864, IPC 9867,
#   ResourceManager 8032 (scheduler 8030, tracker 8031, admin 8033), its web/REST API 8088,
#   NodeManager 8041 (localizer 8040, web 8042), MapReduce shuffle 13562 (every address: Hadoop's
#   ShuffleHandler has no bind-host setting).
# CRAWLFLEET_HADOOP_<NAME>_PORT overrides each (NN, NN_HTTP, DN, DN_HTTP, DN_IPC, RM, RM_WEB, NM, ...).
#
# State: $CRAWLFLEET_STATE_DIR/hadoop (dfs/name, dfs/data, yarn/local, yarn/logs, logs, pid files);
# CRAWLFLEET_HADOOP_DATA overrides. Memory: CRAWLFLEET_HADOOP_HEAP (per daemon, 256m),
# CRAWLFLEET_HADOOP_NM_MEMORY_MB (1536: the AM and two 512 MB tasks), CRAWLFLEET_HADOOP_NM_VCORES (3).
# CRAWLFLEET_HADOOP_TIMEOUT: seconds to wait for readiness (300).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SVC=hadoop
# shellcheck source=scripts/lib-cluster.sh
. "$ROOT/scripts/lib-cluster.sh"

POM="$ROOT/docker/hadoop/pom.xml"
HOME_DIR="${CRAWLFLEET_HADOOP_HOME:-$HOME/.cache/crawlfleet/hadoop-cluster}"
DATA="${CRAWLFLEET_HADOOP_DATA:-$STATE_ROOT/hadoop}"
ADDR="$CLUSTER_ADDR"
check_bind "$ADDR"
HOST="${CRAWLFLEET_HADOOP_HOST:-$ADDR}"
if [ "$HOST" = 0.0.0.0 ]; then log "listening on every address: set CRAWLFLEET_HADOOP_HOST to this machine's name"; exit 2; fi
port() { local v="CRAWLFLEET_HADOOP_${1}_PORT"; echo "${!v:-$2}"; }
NN_PORT=$(port NN 8020); NN_HTTP_PORT=$(port NN_HTTP 9870)
DN_PORT=$(port DN 9866); DN_HTTP_PORT=$(port DN_HTTP 9864); DN_IPC_PORT=$(port DN_IPC 9867)
RM_PORT=$(port RM 8032); RM_SCHED_PORT=$(port RM_SCHED 8030); RM_TRACKER_PORT=$(port RM_TRACKER 8031)
RM_ADMIN_PORT=$(port RM_ADMIN 8033); RM_WEB_PORT=$(port RM_WEB 8088)
NM_PORT=$(port NM 8041); NM_LOCALIZER_PORT=$(port NM_LOCALIZER 8040); NM_WEB_PORT=$(port NM_WEB 8042)
SHUFFLE_PORT=$(port SHUFFLE 13562); JHS_PORT=$(port JHS 10020)
HEAP="${CRAWLFLEET_HADOOP_HEAP:-256m}"
NM_MEMORY_MB="${CRAWLFLEET_HADOOP_NM_MEMORY_MB:-1536}"
NM_VCORES="${CRAWLFLEET_HADOOP_NM_VCORES:-3}"
TIMEOUT="${CRAWLFLEET_HADOOP_TIMEOUT:-300}"
ETC="$HOME_DIR/etc/hadoop"
LOCAL_ETC="$HOME_DIR/etc/local"
LIB="$HOME_DIR/lib"
WEBHDFS="http://$HOST:$NN_HTTP_PORT/webhdfs/v1"
RM_WEB="http://$HOST:$RM_WEB_PORT"
DAEMONS=(namenode datanode resourcemanager nodemanager)
# shellcheck source=scripts/hadoop-conf.sh
. "$ROOT/scripts/hadoop-conf.sh"

write_launchers() {
  mkdir -p "$HOME_DIR/bin"
  cat >"$HOME_DIR/bin/hadoop" <<EOF
#!/bin/sh
# hadoop / hdfs / yarn / mapred for the jars of scripts/svc-hadoop.sh (one launcher, named by \$0).
HADOOP_HOME="$HOME_DIR"
export HADOOP_HOME HADOOP_MAPRED_HOME="\$HADOOP_HOME" HADOOP_CONF_DIR="\${HADOOP_CONF_DIR:-\$HADOOP_HOME/etc/hadoop}"
export JAVA_HOME="\${JAVA_HOME:-$(java_home)}"
CP="\$HADOOP_CONF_DIR:\$HADOOP_HOME/share/webroot:\$HADOOP_HOME/lib/*"
cmd="\$(basename "\$0")"; sub="\${1:-}"
[ \$# -gt 0 ] && shift
case "\$cmd:\$sub" in
  hadoop-local:*) HADOOP_CONF_DIR="\$HADOOP_HOME/etc/local" exec "\$HADOOP_HOME/bin/hadoop" "\$sub" "\$@" ;;
  *:version) CLASS=org.apache.hadoop.util.VersionInfo ;;
  hadoop:fs|hadoop:dfs|hdfs:dfs) CLASS=org.apache.hadoop.fs.FsShell ;;
  hadoop:jar|yarn:jar) CLASS=org.apache.hadoop.util.RunJar ;;
  *:classpath) echo "\$CP"; exit 0 ;;
  *:getconf) CLASS=org.apache.hadoop.hdfs.tools.GetConf ;;
  hdfs:dfsadmin) CLASS=org.apache.hadoop.hdfs.tools.DFSAdmin ;;
  hdfs:namenode) CLASS=org.apache.hadoop.hdfs.server.namenode.NameNode ;;
  hdfs:datanode) CLASS=org.apache.hadoop.hdfs.server.datanode.DataNode ;;
  yarn:node) CLASS=org.apache.hadoop.yarn.client.cli.NodeCLI ;;
  yarn:application|yarn:app) CLASS=org.apache.hadoop.yarn.client.cli.ApplicationCLI; set -- "\$sub" "\$@" ;;
  yarn:logs) CLASS=org.apache.hadoop.yarn.client.cli.LogsCLI ;;
  yarn:rmadmin) CLASS=org.apache.hadoop.yarn.client.cli.RMAdminCLI ;;
  yarn:resourcemanager) CLASS=org.apache.hadoop.yarn.server.resourcemanager.ResourceManager ;;
  yarn:nodemanager) CLASS=org.apache.hadoop.yarn.server.nodemanager.NodeManager ;;
  mapred:job) CLASS=org.apache.hadoop.mapred.JobClient ;;
  *) echo "usage: hadoop version|fs|jar|classpath|getconf; hdfs dfs|dfsadmin|getconf|namenode|datanode;" \\
          "yarn node|application|logs|rmadmin|resourcemanager|nodemanager; mapred job" >&2; exit 2 ;;
esac
exec "\$JAVA_HOME/bin/java" -Xmx\${HADOOP_HEAPSIZE_MAX:-512m} ${SMALL_JVM[*]} $OPENS \\
  -Dhadoop.home.dir="\$HADOOP_HOME" -Dyarn.home.dir="\$HADOOP_HOME" -Dhadoop.log.dir="\$HADOOP_HOME/logs" \\
  -Dlog4j.configuration="file:\$HADOOP_CONF_DIR/log4j.properties" \$HADOOP_OPTS -cp "\$CP" "\$CLASS" "\$@"
EOF
  chmod +x "$HOME_DIR/bin/hadoop"
  local name
  for name in hdfs yarn mapred hadoop-local; do ln -sfn hadoop "$HOME_DIR/bin/$name"; done
}

install() {
  maven_fetch hadoop-jars "$POM"
  mkdir -p "$HOME_DIR/logs"
  ln -sfn "$(maven_lib hadoop-jars "$POM")" "$LIB"
  # Two slf4j backends would make every launch print a warning; keep reload4j's.
  rm -f "$LIB"/slf4j-log4j12-*.jar "$LIB"/log4j-slf4j-impl-*.jar
  write_webapps
  write_launchers
  write_local_conf
  write_cluster_conf
}

# The HDFS daemons' HTTP servers (WebHDFS included) need a webapps/<name> directory on the class path;
# the hadoop-hdfs jar on Maven Central carries none (the YARN ones are in hadoop-yarn-common), so give
# them empty web applications: WebHDFS and the JMX/REST servlets are added in code; only the HTML
# pages of the NameNode's UI are missing.
write_webapps() {
  local app
  for app in hdfs datanode secondary journal; do
    mkdir -p "$HOME_DIR/share/webroot/webapps/$app/WEB-INF"
    echo '<web-app xmlns="http://java.sun.com/xml/ns/javaee" version="2.5"/>' \
      >"$HOME_DIR/share/webroot/webapps/$app/WEB-INF/web.xml"
  done
}

installed() { [ -x "$HOME_DIR/bin/hadoop" ] && [ -f "$(maven_lib hadoop-jars "$POM")/.complete" ]; }

# The four daemons: pid file, log file, main class.
daemon_class() {
  case "$1" in
    namenode) echo org.apache.hadoop.hdfs.server.namenode.NameNode ;;
    datanode) echo org.apache.hadoop.hdfs.server.datanode.DataNode ;;
    resourcemanager) echo org.apache.hadoop.yarn.server.resourcemanager.ResourceManager ;;
    nodemanager) echo org.apache.hadoop.yarn.server.nodemanager.NodeManager ;;
  esac
}
pidfile() { echo "$DATA/$1.pid"; }

daemon_cmd() {  # daemon_cmd NAME [ARGS...]: sets the array CMD
  local name="$1"; shift
  local java; java="$(java_bin)" || { log "no JDK 17+; run: $0 install"; exit 1; }
  # shellcheck disable=SC2206  # OPENS is a list of flags
  CMD=(env HADOOP_HOME="$HOME_DIR" HADOOP_MAPRED_HOME="$HOME_DIR" HADOOP_CONF_DIR="$ETC" JAVA_HOME="$(java_home)"
    "$java" -Xms32m "-Xmx$HEAP" "${SMALL_JVM[@]}" $OPENS -Dproc_"$name"
    -Dhadoop.home.dir="$HOME_DIR" -Dyarn.home.dir="$HOME_DIR" -Dhadoop.log.dir="$DATA/logs" -Dyarn.log.dir="$DATA/logs"
    -Dhadoop.log.file="$name.log" -Dlog4j.configuration="file:$ETC/log4j.properties"
    -cp "$ETC:$HOME_DIR/share/webroot:$LIB/*" "$(daemon_class "$name")" "$@")
}

format_once() {
  [ -f "$DATA/dfs/name/current/VERSION" ] && return 0
  log "formatting the NameNode (once; $DATA/dfs/name)"
  daemon_cmd namenode -format -nonInteractive -force -clusterId crawlfleet
  "${CMD[@]}" >"$DATA/logs/format.log" 2>&1 || { tail -n 30 "$DATA/logs/format.log" >&2; return 1; }
  rm -rf "$DATA/dfs/data"/*  # a DataNode of an older namespace would refuse the new one
}

# --- readiness, over HTTP (curl) so polling starts no JVM -------------------------------------------
hdfs_answers() { [ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$WEBHDFS/?op=GETFILESTATUS" 2>/dev/null)" = 200 ]; }
yarn_answers() { curl -sf -m 5 "$RM_WEB/ws/v1/cluster/info" >/dev/null 2>&1; }
answers() { hdfs_answers && yarn_answers; }

hdfs_writes() {  # create (NameNode -> 307 redirect -> DataNode), read back, delete: a real write
  local user; user="$(id -un)"
  local path="/tmp/.crawlfleet-ready" loc
  loc=$(curl -s -m 10 -o /dev/null -w '%{redirect_url}' -X PUT \
    "$WEBHDFS$path?op=CREATE&overwrite=true&user.name=$user" 2>/dev/null) || return 1
  [ -n "$loc" ] || return 1
  [ "$(curl -s -m 20 -o /dev/null -w '%{http_code}' -X PUT -T - "$loc" <<<"ready" 2>/dev/null)" = 201 ] || return 1
  [ "$(curl -s -m 20 -L "$WEBHDFS$path?op=OPEN&user.name=$user" 2>/dev/null)" = ready ]
}

yarn_node_running() { curl -sf -m 5 "$RM_WEB/ws/v1/cluster/nodes?states=RUNNING" 2>/dev/null | grep -q '"state":"RUNNING"'; }

ready() { hdfs_writes && yarn_node_running; }

wait_ready() {
  local deadline=$((SECONDS + TIMEOUT)) d
  until ready; do
    if [ $SECONDS -ge $deadline ]; then
      log "not ready after ${TIMEOUT}s; last log lines:"
      for d in "${DAEMONS[@]}"; do tail -n 8 "$DATA/logs/$d.out" >&2 || true; done
      return 1
    fi
    for d in "${DAEMONS[@]}"; do
      if ! alive "$(pidfile "$d")"; then log "$d died:"; grep -v classpath "$DATA/logs/$d.out" | tail -n 40 >&2; return 1; fi
    done
    sleep 2
  done
}

start_daemons() {  # start_daemons spawn|child: every daemon not already running
  local how="$1" d
  for d in "${DAEMONS[@]}"; do
    pid_is "$(pidfile "$d")" "$(daemon_class "$d")" && continue
    daemon_cmd "$d"
    if [ "$how" = spawn ]; then
      spawn "$(pidfile "$d")" "$DATA/logs/$d.out" "${CMD[@]}"
    else
      "${CMD[@]}" >"$DATA/logs/$d.out" 2>&1 &
      echo $! >"$(pidfile "$d")"
    fi
  done
}

start() {
  start_lock "$DATA"
  if answers && ready; then log "already running (hdfs://$HOST:$NN_PORT, YARN $RM_WEB)"; return 0; fi
  installed || install
  write_cluster_conf
  mkdir -p "$DATA/logs"
  format_once
  log "starting NameNode, DataNode, ResourceManager, NodeManager on $ADDR (state in $DATA)"
  start_daemons spawn
  wait_ready
  log "ready in ${SECONDS}s (hdfs://$HOST:$NN_PORT, WebHDFS http://$HOST:$NN_HTTP_PORT, YARN $HOST:$RM_PORT)"
}

stop() {
  local i
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_pid "$(pidfile "${DAEMONS[$i]}")" "${DAEMONS[$i]}"; done
}

status() {
  if answers; then
    echo "hadoop: up (hdfs://$HOST:$NN_PORT, WebHDFS http://$HOST:$NN_HTTP_PORT, YARN $HOST:$RM_PORT, $RM_WEB)"
  else
    echo "hadoop: down (HDFS $(hdfs_answers && echo up || echo down), YARN $(yarn_answers && echo up || echo down))"
    return 1
  fi
}

run() {
  if answers; then attach "HDFS and YARN on $HOST" answers; fi
  installed || install
  write_cluster_conf
  mkdir -p "$DATA/logs"
  format_once
  log "starting the four daemons in the foreground (state in $DATA)"
  start_daemons child
  trap 'stop; exit 0' TERM INT
  local ready_said=0 next=0 d
  while :; do
    for d in "${DAEMONS[@]}"; do
      alive "$(pidfile "$d")" || { log "$d exited; stopping the others"; stop; exit 1; }
    done
    if [ "$ready_said" = 0 ] && [ $SECONDS -ge $next ]; then
      next=$((SECONDS + 5))
      if ready; then ready_said=1; log "ready in ${SECONDS}s"; fi
    fi
    nap 2
  done
}

case "${1:-}" in
  install) install; log "installed in $HOME_DIR ($(ls "$LIB"/hadoop-common-*.jar | sed 's/.*hadoop-common-//; s/\.jar//'))" ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  run) run ;;
  *) echo "usage: $0 install|start|stop|status|run" >&2; exit 2 ;;
esac
