#!/usr/bin/env bash
# Hadoop in local mode for `mrjob -r hadoop`: no daemons, just jars and a `hadoop` launcher.
#
#   install  fetch hadoop-streaming + hadoop-client (and a log4j backend) from Maven Central into
#            $CRAWLFLEET_HADOOP_HOME (default ~/.cache/crawlfleet/hadoop), write bin/hadoop and the
#            local-mode config (fs.defaultFS=file:///, mapreduce.framework.name=local)
#   start    nothing to start in local mode; checks the launcher answers `hadoop version`
#   stop     nothing to stop
#   status   prints the version line, exits 1 when not installed
#
# The launcher maps the sub-commands mrjob uses to Hadoop's Java entry points:
#   version -> org.apache.hadoop.util.VersionInfo, fs -> org.apache.hadoop.fs.FsShell,
#   jar -> org.apache.hadoop.util.RunJar, classpath -> prints the class path.
# jobs/hadoop.py turns this directory into mrjob runner arguments.
set -euo pipefail

HADOOP_VERSION="${CRAWLFLEET_HADOOP_VERSION:-3.4.2}"
HOME_DIR="${CRAWLFLEET_HADOOP_HOME:-$HOME/.cache/crawlfleet/hadoop}"
STAMP="$HOME_DIR/.installed-$HADOOP_VERSION"

need() {  # need CMD PACKAGE...: install Debian packages when CMD is missing (fresh machine)
  local cmd="$1"; shift
  command -v "$cmd" >/dev/null 2>&1 && return 0
  echo "svc-hadoop: installing $* for $cmd"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
}

write_pom() {
  cat >"$HOME_DIR/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>crawlfleet</groupId><artifactId>hadoop-local</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client</artifactId><version>$HADOOP_VERSION</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-streaming</artifactId><version>$HADOOP_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
    <dependency><groupId>ch.qos.reload4j</groupId><artifactId>reload4j</artifactId><version>1.2.25</version></dependency>
  </dependencies>
</project>
EOF
}

write_conf() {
  mkdir -p "$HOME_DIR/etc/hadoop" "$HOME_DIR/tmp"
  cat >"$HOME_DIR/etc/hadoop/core-site.xml" <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>fs.defaultFS</name><value>file:///</value></property>
  <property><name>hadoop.tmp.dir</name><value>$HOME_DIR/tmp</value></property>
</configuration>
EOF
  cat >"$HOME_DIR/etc/hadoop/mapred-site.xml" <<'EOF'
<?xml version="1.0"?>
<configuration>
  <property><name>mapreduce.framework.name</name><value>local</value></property>
  <property><name>mapreduce.local.map.tasks.maximum</name><value>2</value></property>
  <property><name>mapreduce.local.reduce.tasks.maximum</name><value>1</value></property>
  <property><name>mapreduce.job.reduces</name><value>1</value></property>
</configuration>
EOF
  # mrjob reads counters from the client's log lines, so keep INFO on stderr.
  cat >"$HOME_DIR/etc/hadoop/log4j.properties" <<'EOF'
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{yy/MM/dd HH:mm:ss} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.metrics2=WARN
EOF
}

write_launcher() {
  mkdir -p "$HOME_DIR/bin"
  cat >"$HOME_DIR/bin/hadoop" <<'EOF'
#!/bin/sh
# Minimal `hadoop` command for local mode (written by scripts/svc-hadoop.sh).
HADOOP_HOME="$(cd "$(dirname "$0")/.." && pwd)"
CP="$HADOOP_HOME/etc/hadoop:$HADOOP_HOME/lib/*"
case "${1:-}" in
  version) shift; CLASS=org.apache.hadoop.util.VersionInfo ;;
  fs|dfs) shift; CLASS=org.apache.hadoop.fs.FsShell ;;
  jar) shift; CLASS=org.apache.hadoop.util.RunJar ;;
  classpath) echo "$CP"; exit 0 ;;
  *) echo "usage: hadoop version|fs|jar|classpath ..." >&2; exit 2 ;;
esac
# Java 17: Hadoop 3.3 reflects into java.base; SPARK/HADOOP stay on loopback only.
exec java -Xmx${HADOOP_HEAPSIZE_MAX:-768m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED \
  --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.net=ALL-UNNAMED \
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
  -Djava.net.preferIPv4Stack=true -Dhadoop.home.dir="$HADOOP_HOME" \
  -Dhadoop.log.dir="$HADOOP_HOME/logs" -Dlog4j.configuration="file:$HADOOP_HOME/etc/hadoop/log4j.properties" \
  $HADOOP_OPTS -cp "$CP" "$CLASS" "$@"
EOF
  chmod +x "$HOME_DIR/bin/hadoop"
}

install() {
  if [ -f "$STAMP" ] && [ -x "$HOME_DIR/bin/hadoop" ] && ls "$HOME_DIR"/lib/hadoop-streaming-*.jar >/dev/null 2>&1; then
    echo "svc-hadoop: $HADOOP_VERSION already installed in $HOME_DIR"
    return 0
  fi
  need java openjdk-17-jre-headless
  need mvn maven
  mkdir -p "$HOME_DIR/lib"
  write_pom
  echo "svc-hadoop: fetching Hadoop $HADOOP_VERSION jars from Maven Central"
  (cd "$HOME_DIR" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$HOME_DIR/lib" \
      -DincludeScope=runtime -Dmdep.overWriteIfNewer=true)
  # Two slf4j backends would make every launch print a warning; keep reload4j's.
  rm -f "$HOME_DIR"/lib/slf4j-log4j12-*.jar "$HOME_DIR"/lib/log4j-slf4j-impl-*.jar
  write_conf
  write_launcher
  touch "$STAMP"
  echo "svc-hadoop: installed; launcher $HOME_DIR/bin/hadoop"
}

status() {
  [ -x "$HOME_DIR/bin/hadoop" ] || { echo "svc-hadoop: not installed"; return 1; }
  "$HOME_DIR/bin/hadoop" version 2>/dev/null | head -1
}

case "${1:-}" in
  install) install ;;
  start) status >/dev/null || { echo "svc-hadoop: run install first" >&2; exit 1; }; echo "svc-hadoop: local mode, nothing to start" ;;
  stop) echo "svc-hadoop: local mode, nothing to stop" ;;
  status) status ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
