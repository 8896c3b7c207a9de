#!/usr/bin/env bash
# Wait until the services a process needs answer, then exec the process (Procfile, docker/compose.yaml).
#
#   scripts/wait-for.sh [--timeout S] [--interval S] DEP... -- COMMAND [ARGS...]
#
# DEP is one of
#   tcp:HOST:PORT    a TCP connection is accepted (unbound, the testbed's DNS, anything with a port)
#   amqp:HOST:PORT   the broker answers an AMQP 0-9-1 protocol header with a Connection.Start frame
#   hbase:HOST:PORT  HBase's Thrift1 server answers a tables() call (its port opens long before the
#                    master can serve a request, ~60 s after a cold start)
#
# On stderr: one line per dependency ("up", or "up after Ns"); for one that does not answer at once, a
# "waiting" line first and a "still waiting" line every 30 s. The checks run in the order given and
# share one deadline: after --timeout seconds in all (default $CRAWLFLEET_WAIT_TIMEOUT_S, else 300) it
# gives up with one line naming the dependency that did not answer, and exits 1 without starting
# COMMAND. Otherwise it replaces itself with COMMAND (exec): signals and the exit status are COMMAND's.
# Between tries it sleeps --interval seconds (default $CRAWLFLEET_WAIT_INTERVAL_S, else 2).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TIMEOUT="${CRAWLFLEET_WAIT_TIMEOUT_S:-300}"
INTERVAL="${CRAWLFLEET_WAIT_INTERVAL_S:-2}"
ME="wait-for"

usage() {
  echo "usage: $0 [--timeout S] [--interval S] tcp:HOST:PORT|amqp:HOST:PORT|hbase:HOST:PORT... -- COMMAND [ARGS...]" >&2
  exit 2
}

deps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) [ $# -ge 2 ] || usage; TIMEOUT="$2"; shift 2 ;;
    --timeout=*) TIMEOUT="${1#--timeout=}"; shift ;;
    --interval) [ $# -ge 2 ] || usage; INTERVAL="$2"; shift 2 ;;
    --interval=*) INTERVAL="${1#--interval=}"; shift ;;
    --) shift; break ;;
    -h | --help) usage ;;
    *) deps+=("$1"); shift ;;
  esac
done
[ $# -gt 0 ] || { echo "$ME: no command after --" >&2; usage; }
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || { echo "$ME: --timeout $TIMEOUT: expected whole seconds" >&2; exit 2; }
[[ "$INTERVAL" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$ME: --interval $INTERVAL: expected seconds" >&2; exit 2; }
for dep in "${deps[@]}"; do
  [[ "$dep" =~ ^(tcp|amqp|hbase):[^:]+:[0-9]+$ ]] \
    || { echo "$ME: $dep: expected tcp:HOST:PORT, amqp:HOST:PORT or hbase:HOST:PORT" >&2; exit 2; }
done

python_bin() {
  if [ -x "$ROOT/.venv/bin/python" ]; then echo "$ROOT/.venv/bin/python"; else command -v python3; fi
}

tcp_up() {  # tcp_up HOST PORT
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

amqp_up() {  # the same check as scripts/svc-rabbitmq.sh: a Connection.Start frame (type 1) comes back
  timeout 5 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "AMQP\x00\x00\x09\x01" >&3
    IFS= read -r -t 3 -n 1 -d "" frame <&3 || exit 1
    [ "$(printf "%d" "'"'"'$frame")" = 1 ]' "$1" "$2" 2>/dev/null
}

hbase_up() {  # the same check as scripts/svc-hbase.sh: Thrift answers a real request
  tcp_up "$1" "$2" || return 1  # cheap first: no Python start while the port is closed
  timeout 20 "$(python_bin)" - "$1" "$2" <<'EOF' >/dev/null 2>&1
import sys
import happybase
conn = happybase.Connection(sys.argv[1], int(sys.argv[2]), timeout=5000, autoconnect=True)
conn.tables()
conn.close()
EOF
}

describe() {  # what the dependency must do to count as up
  case "$1" in
    tcp) echo "accepts a TCP connection" ;;
    amqp) echo "answers AMQP" ;;
    hbase) echo "HBase Thrift answers tables()" ;;
  esac
}

start=$SECONDS
deadline=$((SECONDS + TIMEOUT))
for dep in "${deps[@]}"; do
  kind="${dep%%:*}"; rest="${dep#*:}"; host="${rest%:*}"; port="${rest##*:}"
  t0=$SECONDS
  next_note=$SECONDS
  until "${kind}_up" "$host" "$port"; do
    if [ $SECONDS -gt $deadline ]; then  # -gt: SECONDS counts whole seconds, so never less than TIMEOUT
      echo "$ME: gave up after $((SECONDS - start))s waiting for $dep ($(describe "$kind")); not starting: $*" >&2
      exit 1
    fi
    if [ $SECONDS -ge $next_note ]; then
      if [ $SECONDS -eq $t0 ]; then
        echo "$ME: waiting for $dep ($(describe "$kind")); giving up after ${TIMEOUT}s" >&2
      else
        echo "$ME: still waiting for $dep after $((SECONDS - t0))s" >&2
      fi
      next_note=$((SECONDS + 30))
    fi
    sleep "$INTERVAL"
  done
  if [ $SECONDS -gt $t0 ]; then echo "$ME: $dep up after $((SECONDS - t0))s" >&2; else echo "$ME: $dep up" >&2; fi
done
exec "$@"
