# Shared by the cluster services' scripts (svc-s3.sh, svc-hadoop.sh, svc-spark.sh); sourced, not run.
#
# The cluster's address: every cluster service listens on and advertises CRAWLFLEET_CLUSTER_ADDR,
# 127.0.40.1 by default. That is a loopback address (all of 127.0.0.0/8 is loopback on Linux), so on one
# machine nothing is exposed off-host, and yet it is not 127.0.0.1: a network namespace (a "machine" in
# the tests, scripts/netns.sh --route 127.0.40.0/24) routes it through its veth to this one, where
# 127.0.0.1 would be its own loopback. The HDFS DataNode's address in the NameNode's WebHDFS redirects,
# the YARN NodeManager's, Spark's master and worker: all the same address, reachable from both sides.
# On a real cluster set it to the machine's address on the fleet's network. 0.0.0.0 (every address) is
# refused unless CRAWLFLEET_CLUSTER_ANY=1 says a firewall guards the ports (none of these services
# authenticates its clients here, except S3's signed requests).
#
# State (data, config, logs, pid files) lives under CRAWLFLEET_STATE_DIR (~/.cache/crawlfleet/state),
# jars under ~/.cache/crawlfleet/<service>/<POM checksum>/lib: nothing in the repository.

CLUSTER_ADDR="${CRAWLFLEET_CLUSTER_ADDR:-127.0.40.1}"
STATE_ROOT="${CRAWLFLEET_STATE_DIR:-$HOME/.cache/crawlfleet/state}"
JAR_ROOT="${CRAWLFLEET_JAR_CACHE:-$HOME/.cache/crawlfleet}"
SVC="${SVC:-cluster}"

log() { echo "svc-$SVC: $*" >&2; }

check_bind() {  # check_bind ADDR: refuse every-address binds unless asked for explicitly
  case "$1" in
    0.0.0.0|::|'[::]'|'')
      if [ "${CRAWLFLEET_CLUSTER_ANY:-0}" != 1 ]; then
        log "refusing to listen on '$1' (every address): give this machine's address on the fleet's network" \
            "in CRAWLFLEET_CLUSTER_ADDR, or set CRAWLFLEET_CLUSTER_ANY=1 if a firewall guards the ports"
        exit 2
      fi ;;
  esac
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

java_home() { dirname "$(dirname "$(readlink -f "$(java_bin)")")"; }

need_tools() {  # a JDK and maven; installed only when missing (never upgrade a JDK under running JVMs)
  local missing=()
  java_bin >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || missing+=(maven)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
}

# maven_lib NAME POM: the directory of POM's runtime jars, keyed by the POM's checksum (editing the POM
# fetches a fresh set beside the old one).
maven_lib() { echo "$JAR_ROOT/$1/$(sha256sum "$2" | cut -c1-16)/lib"; }

maven_fetch() {  # maven_fetch NAME POM: fetch once (flock: concurrent installs fetch once)
  local lib; lib="$(maven_lib "$1" "$2")"
  [ -f "$lib/.complete" ] && return 0
  need_tools
  mkdir -p "$JAR_ROOT/$1"
  (
    flock 9
    [ -f "$lib/.complete" ] && exit 0
    log "fetching jars from Maven Central into $lib"
    rm -rf "$lib.tmp"
    mvn -q -B -Dstyle.color=never -f "$2" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib.tmp" >&2
    rm -rf "$lib" && mv "$lib.tmp" "$lib" && touch "$lib/.complete"
  ) 9>"$JAR_ROOT/$1/.lock"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# A pid file whose process is ours (a pid file left by a killed run may name a reused pid).
pid_is() { alive "$1" && grep -qa -- "$2" "/proc/$(cat "$1")/cmdline" 2>/dev/null; }

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

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

NAP_PID=""
nap() { sleep "$1" & NAP_PID=$!; wait "$NAP_PID" || true; NAP_PID=""; }  # a sleep a trap can cut short

# attach DESC CHECK...: a service we did not start answers; stay in the foreground while CHECK succeeds
# (honcho), exit 1 when it stops answering, 0 on TERM/INT (leaving it running).
attach() {
  local desc="$1"; shift
  log "already running ($desc); attached, watching it"
  trap 'log "detached; $desc keeps running"; [ -z "$NAP_PID" ] || kill "$NAP_PID" 2>/dev/null; exit 0' TERM INT
  while "$@"; do nap 5; done
  log "$desc went away"
  exit 1
}

# start_lock DIR: hold DIR/.start.lock until this shell exits, so that two `start`s at once (two test
# tiers' fixtures, two shells) run one after the other: the second finds the service up and returns.
start_lock() {
  mkdir -p "$1"
  exec 8>"$1/.start.lock"
  flock 8
}

# spawn PIDFILE LOG CMD...: start CMD detached from this shell (it outlives the caller), record its pid.
spawn() {
  local pidfile="$1" logfile="$2"; shift 2
  setsid nohup "$@" >"$logfile" 2>&1 </dev/null 8>&- &  # 8: start_lock's descriptor stays here
  echo $! >"$pidfile"
}

# JVM flags for small long-lived daemons on a 2-core machine: the serial collector (no parallel GC
# threads), C1 only (less JIT CPU at start), IPv4.
SMALL_JVM=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k -Djava.net.preferIPv4Stack=true)
