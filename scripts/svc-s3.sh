#!/usr/bin/env bash
# An S3-compatible object server: s3proxy from Maven Central (docker/s3proxy/pom.xml) with jclouds'
# `filesystem` back-end (each bucket a directory under the state dir), AWS signature v2/v4 auth.
#
#   scripts/svc-s3.sh install   java 17 + maven (apt-get only if missing), jars into the cache
#   scripts/svc-s3.sh start     start in the background, wait until it answers HTTP
#   scripts/svc-s3.sh stop      stop the server this script started
#   scripts/svc-s3.sh status    exit 0 when it answers; prints the endpoint
#   scripts/svc-s3.sh run       foreground (Procfile / honcho): attach to a server already answering on
#                               the port (exit 1 when it goes away, 0 on TERM/INT, leaving it running),
#                               else run it as a child, stopped on TERM/INT
#   scripts/svc-s3.sh env       print the client's environment (the lines of client.env)
#
# How a client finds it: the standard AWS variables are all s3fs / boto need, and `start` writes them to
# $CRAWLFLEET_STATE_DIR/s3/client.env (owner-only), so `set -a; . ~/.cache/crawlfleet/state/s3/client.env`:
#   AWS_ENDPOINT_URL=http://127.0.40.1:9000  AWS_ACCESS_KEY_ID=crawlfleet
#   AWS_SECRET_ACCESS_KEY=crawlfleet-dev-secret  AWS_DEFAULT_REGION=us-east-1
# They work with botocore's defaults: s3proxy runs with ignore-unknown-headers, since botocore >= 1.36
# sends CRC32 checksum headers (on every multi-object delete, whatever AWS_REQUEST_CHECKSUM_CALCULATION
# says) that s3proxy 2.6 otherwise refuses ("A header you provided implies functionality that is not
# implemented"), which broke s3fs's rm and mv.
# jobs/cluster.py reads the same (the env first, else that file, else these dev defaults), so
# `s3fs.S3FileSystem(**jobs.cluster.s3_options())` reaches it. Path-style URLs: http://HOST:PORT/BUCKET/KEY.
#
# Environment (all optional):
#   CRAWLFLEET_CLUSTER_ADDR   address it listens on and clients use (127.0.40.1; scripts/lib-cluster.sh)
#   CRAWLFLEET_S3_BIND        overrides that for S3 alone
#   CRAWLFLEET_S3_PORT        port (9000)
#   CRAWLFLEET_S3_IDENTITY / CRAWLFLEET_S3_CREDENTIAL   the access key pair (a fixed dev pair by default:
#                             the server is on loopback; set your own for anything reachable)
#   CRAWLFLEET_S3_BUCKETS     buckets made at start, space-separated (crawlfleet). s3proxy answers
#                             GetBucketLocation for any name, so s3fs's mkdir() of a NEW bucket raises
#                             FileExistsError: use these, or fs.call_s3("create_bucket", Bucket=NAME).
#                             It has no GetBucketVersioning either, which s3fs's rm(BUCKET, recursive=True)
#                             (of a whole bucket, not of a prefix) asks: fs.rm(fs.find(BUCKET)); fs.rmdir(BUCKET)
#   CRAWLFLEET_S3_DATA        blobs, config, logs, pid ($CRAWLFLEET_STATE_DIR/s3)
#   CRAWLFLEET_S3_HEAP        JVM heap (128m)
#   CRAWLFLEET_S3_TIMEOUT     seconds to wait for it to answer (90)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SVC=s3
# shellcheck source=scripts/lib-cluster.sh
. "$ROOT/scripts/lib-cluster.sh"

POM="$ROOT/docker/s3proxy/pom.xml"
BIND="${CRAWLFLEET_S3_BIND:-$CLUSTER_ADDR}"
PORT="${CRAWLFLEET_S3_PORT:-9000}"
IDENTITY="${CRAWLFLEET_S3_IDENTITY:-crawlfleet}"
CREDENTIAL="${CRAWLFLEET_S3_CREDENTIAL:-crawlfleet-dev-secret}"
DATA="${CRAWLFLEET_S3_DATA:-$STATE_ROOT/s3}"
HEAP="${CRAWLFLEET_S3_HEAP:-128m}"
TIMEOUT="${CRAWLFLEET_S3_TIMEOUT:-90}"
BUCKETS="${CRAWLFLEET_S3_BUCKETS-crawlfleet}"
check_bind "$BIND"
HOST="$BIND"; [ "$BIND" = 0.0.0.0 ] && HOST=127.0.0.1
ENDPOINT="http://$HOST:$PORT"
PID="$DATA/s3proxy.pid"

install() { maven_fetch s3proxy "$POM"; }

write_conf() {
  mkdir -p "$DATA/blobs" "$DATA/logs"
  local b
  for b in $BUCKETS; do mkdir -p "$DATA/blobs/$b"; done  # the filesystem back-end: a bucket is a directory
  chmod 700 "$DATA"
  umask 077
  cat >"$DATA/s3proxy.properties" <<EOF
s3proxy.endpoint=http://$BIND:$PORT
s3proxy.authorization=aws-v2-or-v4
s3proxy.ignore-unknown-headers=true
s3proxy.identity=$IDENTITY
s3proxy.credential=$CREDENTIAL
jclouds.provider=filesystem
jclouds.filesystem.basedir=$DATA/blobs
EOF
  cat >"$DATA/client.env" <<EOF
AWS_ENDPOINT_URL=$ENDPOINT
AWS_ACCESS_KEY_ID=$IDENTITY
AWS_SECRET_ACCESS_KEY=$CREDENTIAL
AWS_DEFAULT_REGION=us-east-1
EOF
  cat >"$DATA/logback.xml" <<'EOF'
<configuration>
  <appender name="err" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%d{ISO8601} %-5level [%thread] %logger{20}: %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="err"/></root>
  <logger name="org.gaul.s3proxy" level="INFO"/>
</configuration>
EOF
  umask 022
}

server_cmd() {  # sets the array CMD
  local java; java="$(java_bin)" || { log "no JDK 17+; run: $0 install"; exit 1; }
  CMD=("$java" -Xms32m "-Xmx$HEAP" "${SMALL_JVM[@]}" -Dlogback.configurationFile="$DATA/logback.xml"
    -cp "$(maven_lib s3proxy "$POM")/*" org.gaul.s3proxy.Main --properties "$DATA/s3proxy.properties")
}

# Any HTTP answer counts (an anonymous request gets 403 AccessDenied: the server is up and checks auth).
answers() { [ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$ENDPOINT/" 2>/dev/null)" != 000 ]; }

wait_ready() {
  local deadline=$((SECONDS + TIMEOUT))
  until answers; do
    if [ $SECONDS -ge $deadline ]; then log "no answer on $ENDPOINT after ${TIMEOUT}s"; tail -n 20 "$DATA/logs/s3proxy.log" >&2; return 1; fi
    if ! alive "$PID"; then log "s3proxy died:"; tail -n 30 "$DATA/logs/s3proxy.log" >&2; return 1; fi
    sleep 0.5
  done
}

start() {
  start_lock "$DATA"
  write_conf  # client.env for clients even when a server already answers
  if answers; then log "already running ($ENDPOINT)"; return 0; fi
  install
  if ! pid_is "$PID" org.gaul.s3proxy; then
    log "starting on $ENDPOINT (blobs in $DATA/blobs)"
    server_cmd
    spawn "$PID" "$DATA/logs/s3proxy.log" "${CMD[@]}"
  fi
  wait_ready
  log "ready in ${SECONDS}s ($ENDPOINT; client settings in $DATA/client.env)"
}

stop() { stop_pid "$PID" s3proxy; }

run() {
  write_conf
  if answers; then attach "s3 on $ENDPOINT" answers; fi
  install
  server_cmd
  log "starting on $ENDPOINT in the foreground (blobs in $DATA/blobs)"
  "${CMD[@]}" &
  echo $! >"$PID"
  trap 'stop; exit 0' TERM INT
  wait "$(cat "$PID")" || true
  log "s3proxy exited"
  rm -f "$PID"
  exit 1
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) if answers; then echo "s3: up ($ENDPOINT)"; else echo "s3: down"; exit 1; fi ;;
  run) run ;;
  env) [ -f "$DATA/client.env" ] || write_conf; cat "$DATA/client.env" ;;
  *) echo "usage: $0 install|start|stop|status|run|env" >&2; exit 2 ;;
esac
