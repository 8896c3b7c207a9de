#!/usr/bin/env bash
# The fleet's shared caching resolver (S1's layered DNS): unbound on 127.0.0.1:${CRAWLFLEET_UNBOUND_PORT:-5335},
# forwarding crawl.test to the test bed's zone server on 127.0.0.1:${CRAWLFLEET_TESTBED_DNS_PORT:-5353}.
# Usage: svc-unbound.sh install | start | stop | status   (idempotent; fast when already done)
#        svc-unbound.sh run    (foreground, for a Procfile: `unbound: scripts/svc-unbound.sh run`)
# `run` attaches to an unbound already serving 127.0.0.1:$PORT (`make services`, `start`): it stays in
# the foreground while that port answers, exits 1 when it goes away and 0 on TERM/INT (leaving that
# unbound running). Otherwise it runs its own unbound in the foreground (unbound -d).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${CRAWLFLEET_UNBOUND_PORT:-5335}"
UPSTREAM_PORT="${CRAWLFLEET_TESTBED_DNS_PORT:-5353}"
RUN_DIR="${CRAWLFLEET_UNBOUND_DIR:-/tmp/crawlfleet-unbound}"
MIN_TTL="${CRAWLFLEET_DNS_MIN_TTL_S:-300}"
MAX_TTL="${CRAWLFLEET_DNS_MAX_TTL_S:-86400}"
CONF="$RUN_DIR/unbound.conf"
PIDFILE="$RUN_DIR/unbound.pid"
UNBOUND="$(command -v unbound || echo /usr/sbin/unbound)"

have_unbound() { [ -x "$UNBOUND" ]; }

install() {
  if have_unbound; then return 0; fi
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends unbound >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends unbound >/dev/null
  fi
  # Debian's package starts a system-wide unbound on port 53; we run our own instance only.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now unbound >/dev/null 2>&1 || true; fi
  if command -v service >/dev/null 2>&1; then service unbound stop >/dev/null 2>&1 || true; fi
  UNBOUND="$(command -v unbound || echo /usr/sbin/unbound)"
}

render() {
  mkdir -p "$RUN_DIR"
  sed -E \
    -e "s|^( *port:) *[0-9]+.*|\1 $PORT|" \
    -e "s|^( *forward-addr:) *127\.0\.0\.1@[0-9]+.*|\1 127.0.0.1@$UPSTREAM_PORT|" \
    -e "s|^( *directory:) .*|\1 \"$RUN_DIR\"|" \
    -e "s|^( *pidfile:) .*|\1 \"$PIDFILE\"|" \
    -e "s|^( *cache-min-ttl:) .*|\1 $MIN_TTL|" \
    -e "s|^( *cache-max-ttl:) .*|\1 $MAX_TTL|" \
    docker/unbound.conf >"$CONF.new"
  mv "$CONF.new" "$CONF"
}

running() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

start() {
  have_unbound || install
  if running; then echo "unbound: already running on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"; return 0; fi
  render
  "$(dirname "$UNBOUND")/unbound-checkconf" "$CONF" >/dev/null
  if ! "$UNBOUND" -c "$CONF" 2>>"$RUN_DIR/unbound.log"; then   # daemonizes and writes the pidfile
    echo "unbound: failed to start; see $RUN_DIR/unbound.log" >&2
    tail -n 20 "$RUN_DIR/unbound.log" >&2 || true
    return 1
  fi
  for _ in $(seq 1 50); do
    if running; then echo "unbound: running on 127.0.0.1:$PORT -> crawl.test @127.0.0.1:$UPSTREAM_PORT"; return 0; fi
    sleep 0.1
  done
  echo "unbound: did not start; see $RUN_DIR/unbound.log" >&2
  tail -n 20 "$RUN_DIR/unbound.log" >&2 || true
  return 1
}

stop() {
  if running; then
    pid="$(cat "$PIDFILE")"
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$PIDFILE"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }  # unbound also serves DNS over TCP

NAP_PID=""
nap() { sleep "$1" & NAP_PID=$!; wait "$NAP_PID" || true; NAP_PID=""; }  # a sleep a trap can cut short

attach() {
  local upstream
  upstream="$(sed -nE 's/^ *forward-addr: *127\.0\.0\.1@([0-9]+).*/\1/p' "$CONF" 2>/dev/null | head -1)"
  echo "unbound: already running on 127.0.0.1:$PORT${upstream:+ (crawl.test -> 127.0.0.1:$upstream)}; attached, watching it"
  if [ -n "$upstream" ] && [ "$upstream" != "$UPSTREAM_PORT" ]; then
    echo "unbound: warning: it forwards crawl.test to port $upstream, not $UPSTREAM_PORT; restart it with" \
      "CRAWLFLEET_TESTBED_DNS_PORT=$UPSTREAM_PORT $0 stop/start to change that" >&2
  fi
  trap 'echo "unbound: detached; the unbound on 127.0.0.1:$PORT keeps running"; [ -z "$NAP_PID" ] || kill "$NAP_PID" 2>/dev/null; exit 0' TERM INT
  for _ in $(seq 1 20); do port_open && break; nap 0.5; done  # started (pid file) but not listening yet
  while port_open; do nap 5; done
  echo "unbound: the unbound on 127.0.0.1:$PORT went away" >&2
  exit 1
}

run() {
  if port_open || running; then attach; fi
  have_unbound || install
  render
  echo "unbound: starting on 127.0.0.1:$PORT in the foreground -> crawl.test @127.0.0.1:$UPSTREAM_PORT"
  exec "$UNBOUND" -d -c "$CONF"
}

status() {
  if running; then echo "unbound: running (pid $(cat "$PIDFILE")) on 127.0.0.1:$PORT"; else echo "unbound: stopped"; return 1; fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  run) run ;;
  *) echo "usage: $0 install|start|stop|status|run" >&2; exit 2 ;;
esac
