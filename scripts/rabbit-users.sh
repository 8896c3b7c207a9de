#!/usr/bin/env bash
# Per-role RabbitMQ users for a crawlfleet fleet (docs/SECURITY.md), idempotent:
#
#   scripts/rabbit-users.sh [--vhost V] [--secrets DIR] [--files-only] NODE...
#
# --files-only: make the secret files below and touch no broker (before a broker is up).
# - vhost V (default crawlfleet);
# - user crawlfleet-dispatcher: every permission on V (it declares the topology and publishes batches;
#   `crawlfleet links` runs with it too);
# - one user node-NODE per fetch node, which may only
#     consume its own queue fetch.NODE (read), bind it to crawlfleet.fetch,
#     publish to the results and heartbeat exchanges (write: crawlfleet.results, crawlfleet.heartbeats;
#     and crawlfleet.dead, which RabbitMQ requires to declare a queue dead-lettering there),
#     declare its queue and those exchanges (configure);
#   so it cannot read another node's queue, and cannot publish a batch (no write on amq.default or
#   crawlfleet.fetch). Topic permissions: none on any topic exchange (write/read patterns "^$").
# - secrets in DIR (default ~/.cache/crawlfleet/secrets, per machine like the certificates:
#   scripts/fleet-files.sh; mode 700; each file 600): DIR/USER.password (random, kept
#   across runs), DIR/fleet.key (the fleet's signing key, kept) and DIR/node-NODE.key (each node's key,
#   derived from the fleet key: the only key a node holds).
# Prints the broker URL of each user without its password (use fleet.broker_password_file).
# The broker: RABBITMQ_NODENAME (default rabbit@localhost), as rabbitmqctl takes it.
# The guest user keeps its loopback-only default; give guest no permission on V.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VHOST=crawlfleet SECRETS="${CRAWLFLEET_MACHINE_DIR:-$HOME/.cache/crawlfleet}/secrets" NODES=() FILES_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --files-only) FILES_ONLY=1; shift ;;
    --vhost) VHOST=$2; shift 2 ;;
    --secrets) SECRETS=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "rabbit-users.sh: unknown option $1" >&2; exit 2 ;;
    *) NODES+=("$1"); shift ;;
  esac
done
for n in "${NODES[@]}"; do
  [[ "$n" =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ ]] || { echo "rabbit-users.sh: bad node name '$n'" >&2; exit 2; }
done
export RABBITMQ_NODENAME="${RABBITMQ_NODENAME:-rabbit@localhost}"
PY="$ROOT/.venv/bin/python"; [ -x "$PY" ] || PY=python3
umask 077
mkdir -p "$SECRETS"
chmod 700 "$SECRETS"
exec 9>"$SECRETS/.lock"  # one run at a time: two would race on the files and the passwords
flock 9

ctl() { rabbitmqctl -q "$@"; }
# Secret files are written whole or not at all (a temporary file renamed over the old one): processes read
# them while this runs (the dev stack starts its workers beside the broker, whose start runs this script),
# and a reader must never see a truncated, empty key (seen: a worker refused to start on an empty node key).
write_file() {  # write_file FILE: stdin into FILE, atomically, mode 600; empty input leaves FILE as it was
  local tmp; tmp=$(mktemp "$1.XXXXXX")
  if cat >"$tmp" && [ -s "$tmp" ] && chmod 600 "$tmp" && mv -f "$tmp" "$1"; then return 0; fi
  rm -f "$tmp"
  return 1
}
secret() {  # secret FILE: the file's text, made with 32 random bytes (hex) when missing
  [ -s "$1" ] || "$PY" -c 'import secrets; print(secrets.token_hex(32))' | write_file "$1"
  chmod 600 "$1"
  cat "$1"
}
USERS=""  # listed once: every rabbitmqctl call starts an Erlang VM (~1 s of CPU)
user() {  # user NAME: created, or its password set to DIR/NAME.password (rabbitmqctl reads it from stdin)
  local name=$1 pw
  pw=$(secret "$SECRETS/$name.password")
  [ -n "$USERS" ] || USERS=$(ctl list_users | awk '{print $1}')
  if grep -qx "$name" <<<"$USERS"; then
    printf '%s' "$pw" | ctl change_password "$name" >/dev/null
  else
    printf '%s' "$pw" | ctl add_user "$name" >/dev/null
  fi
}
re_quote() { printf '%s' "$1" | sed 's/[.[\*^$()+?{}|-]/\\&/g'; }

node_key_file() {  # DIR/node-NODE.key, derived from the fleet key (passed in the environment, never argv)
  FLEET_KEY="$(cat "$SECRETS/fleet.key")" "$PY" -c \
    'import os, sys; sys.path.insert(0, sys.argv[2]); from pipeline.transport.wire.signing import node_key; print(node_key(os.environ["FLEET_KEY"], sys.argv[1]))' \
    "$1" "$ROOT" | write_file "$SECRETS/node-$1.key"
}
secret "$SECRETS/fleet.key" >/dev/null
secret "$SECRETS/crawlfleet-dispatcher.password" >/dev/null
for n in "${NODES[@]}"; do
  secret "$SECRETS/node-$n.password" >/dev/null
  node_key_file "$n"
done
[ "$FILES_ONLY" = 1 ] && { echo "rabbit-users: secret files in $SECRETS"; exit 0; }

ctl list_vhosts | grep -qx "$VHOST" || ctl add_vhost "$VHOST"
user crawlfleet-dispatcher
ctl set_permissions -p "$VHOST" crawlfleet-dispatcher '.*' '.*' '.*'
echo "dispatcher: user crawlfleet-dispatcher, vhost $VHOST, password $SECRETS/crawlfleet-dispatcher.password, key $SECRETS/fleet.key"
for n in "${NODES[@]}"; do
  q="fetch\\.$(re_quote "$n")"
  user "node-$n"
  ctl set_permissions -p "$VHOST" "node-$n" \
    "^($q|crawlfleet\\.(fetch|results|heartbeats))\$" \
    "^($q|crawlfleet\\.(results|heartbeats|dead|serials))\$" \
    "^($q|crawlfleet\\.fetch|amq\\.rabbitmq\\.reply-to)\$"
  ctl set_topic_permissions -p "$VHOST" "node-$n" 'amq.topic' '^$' '^$'
  echo "node $n: user node-$n, vhost $VHOST, password $SECRETS/node-$n.password, key $SECRETS/node-$n.key"
done
