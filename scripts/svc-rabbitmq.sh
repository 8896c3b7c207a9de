#!/usr/bin/env bash
# RabbitMQ for fleet mode (#6): install | start | stop | status | run | conf.
#
# Idempotent and fast when already done. Debian's rabbitmq-server, plain AMQP (guest/guest) on
# 127.0.0.1:5672 only, and a TLS listener on 5671 with peer verification (docs/SECURITY.md):
# `conf` (run by start and run before they start a broker) makes the certificates if missing
# (scripts/certs.sh into CRAWLFLEET_RABBITMQ_CERTS, default ~/.cache/crawlfleet/certs: one CA per machine,
# shared by every clone, whose var/certs and var/secrets link there: scripts/fleet-files.sh), copies the broker's into
# CONF_DIR/tls readable by the rabbitmq user, and writes CONF_DIR/rabbitmq.conf (ssl listener,
# verify_peer, fail_if_no_peer_cert) and advanced.config (Erlang distribution on loopback only). A broker
# already running is never restarted: the config applies at its next start (`status` says so).
# Environment: CRAWLFLEET_RABBITMQ_TLS=0 (no TLS listener), CRAWLFLEET_RABBITMQ_TLS_PORT (5671),
# CRAWLFLEET_RABBITMQ_TLS_BIND (127.0.0.1; the address other machines reach, e.g. 0.0.0.0),
# CRAWLFLEET_RABBITMQ_CERTS, CRAWLFLEET_RABBITMQ_CONF_DIR (/etc/rabbitmq/crawlfleet).
# Per-role users and permissions: scripts/rabbit-users.sh. `rabbitmqctl` starts an Erlang VM (~1 s CPU per call), so readiness is polled
# sparingly: first the TCP port (cheap), then `rabbitmqctl status` once or twice.
# `run` keeps RabbitMQ in the foreground, for honcho (Procfile) and containers: it attaches to a broker
# already listening on the port (watches it; exits 1 when it goes away, 0 on TERM/INT, leaving it
# running), or else execs rabbitmq-server. Attached to a running broker, start and run say on one line
# when its certificate does not verify against the machine's CA (scripts/fleet-files.sh check).
set -euo pipefail

PORT="${CRAWLFLEET_RABBITMQ_PORT:-5672}"
WAIT_S="${CRAWLFLEET_RABBITMQ_WAIT_S:-90}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TLS="${CRAWLFLEET_RABBITMQ_TLS:-1}"
TLS_PORT="${CRAWLFLEET_RABBITMQ_TLS_PORT:-5671}"
TLS_BIND="${CRAWLFLEET_RABBITMQ_TLS_BIND:-127.0.0.1}"
# The dev stack's certificates and secrets, per machine (scripts/fleet-files.sh; the image sets /app/var).
MACHINE="${CRAWLFLEET_MACHINE_DIR:-$HOME/.cache/crawlfleet}"
CERTS="${CRAWLFLEET_RABBITMQ_CERTS:-$MACHINE/certs}"
CONF_DIR="${CRAWLFLEET_RABBITMQ_CONF_DIR:-/etc/rabbitmq/crawlfleet}"
# The dev stack's fetch nodes (Procfile, docker/compose.yaml): their users, certificates and keys are made
# with the broker's config (files) and once it answers (users); "" = none.
DEV_NODES="${CRAWLFLEET_RABBITMQ_DEV_NODES-edge1 edge2}"
SECRETS="${CRAWLFLEET_RABBITMQ_SECRETS:-$MACHINE/secrets}"
# Keep the node name stable whatever the container/host name is.
export RABBITMQ_NODENAME="${RABBITMQ_NODENAME:-rabbit@localhost}"
export RABBITMQ_NODE_IP_ADDRESS="${RABBITMQ_NODE_IP_ADDRESS:-127.0.0.1}"
export RABBITMQ_NODE_PORT="$PORT"
export ERL_EPMD_ADDRESS="${ERL_EPMD_ADDRESS:-127.0.0.1}"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

# The broker answers an AMQP 0-9-1 protocol header with a Connection.Start frame (type 1): a cheap
# readiness check that needs no Erlang VM, and works whatever node name the broker was started with.
amqp_ready() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
    printf 'AMQP\x00\x00\x09\x01' >&3
    IFS= read -r -t 3 -n 1 -d '' frame <&3 || exit 1
    [ "$(printf '%d' "'$frame")" = 1 ]
  ) 2>/dev/null
}

installed() { command -v rabbitmq-server >/dev/null 2>&1 && command -v rabbitmqctl >/dev/null 2>&1; }

do_install() {
  if installed; then echo "rabbitmq: installed"; return 0; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d: do not let the package start its own (systemd-less) service during install.
  local had_policy=0
  [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  if [ "$had_policy" = 0 ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
  apt-get install -y -qq rabbitmq-server >/dev/null
  if [ "$had_policy" = 0 ]; then rm -f /usr/sbin/policy-rc.d; fi
  echo "rabbitmq: installed $(dpkg-query -W -f='${Version}' rabbitmq-server)"
}

ctl_ready() { rabbitmqctl -q status >/dev/null 2>&1; }

wait_ready() {
  local deadline=$((SECONDS + WAIT_S))
  until amqp_ready; do
    [ $SECONDS -lt $deadline ] || { echo "rabbitmq: no AMQP answer on $PORT after ${WAIT_S}s" >&2; return 1; }
    sleep 0.5
  done
  # Then confirm with rabbitmqctl, sparingly (each call starts an Erlang VM: ~1 s of CPU).
  until ctl_ready; do
    [ $SECONDS -lt $deadline ] || { echo "rabbitmq: rabbitmqctl status failed after ${WAIT_S}s" >&2; return 1; }
    sleep 2
  done
}

# The dev stack's users (scripts/rabbit-users.sh) on a broker that answers, unless they are there already
# (a marker per broker node; else one rabbitmqctl call to see). Delete the marker after wiping the broker.
dev_users() {
  [ -n "$DEV_NODES" ] || return 0
  local marker="$SECRETS/.users-$RABBITMQ_NODENAME-${DEV_NODES// /-}"
  [ -e "$marker" ] && return 0
  local have n missing=0
  have=$(rabbitmqctl -q list_users 2>/dev/null | awk '{print $1}') || return 0
  for n in crawlfleet-dispatcher $(printf 'node-%s ' $DEV_NODES); do grep -qx "$n" <<<"$have" || missing=1; done
  if [ "$missing" = 1 ]; then
    # shellcheck disable=SC2086  # a list of node names
    "$ROOT/scripts/rabbit-users.sh" --secrets "$SECRETS" $DEV_NODES >/dev/null || return 0
    echo "rabbitmq: dev stack users ready ($SECRETS)" >&2
  fi
  touch "$marker"
}

# The dev stack's certificates and secret files (no broker needed), before anything starts; this clone's
# var/certs and var/secrets (which docker/fleet/*.toml name) link to them.
dev_files() {
  [ -n "$DEV_NODES" ] || return 0
  CRAWLFLEET_RABBITMQ_CERTS="$CERTS" CRAWLFLEET_RABBITMQ_SECRETS="$SECRETS" CRAWLFLEET_RABBITMQ_TLS_PORT="$TLS_PORT" \
    CRAWLFLEET_RABBITMQ_TLS_BIND="$TLS_BIND" "$ROOT/scripts/fleet-files.sh" link
  # shellcheck disable=SC2086  # a list of node names
  "$ROOT/scripts/certs.sh" --dir "$CERTS" $DEV_NODES >/dev/null
  # shellcheck disable=SC2086
  "$ROOT/scripts/rabbit-users.sh" --files-only --secrets "$SECRETS" $DEV_NODES >/dev/null
}

# The broker's config for its next start (idempotent; never touches a running broker).
do_conf() {
  mkdir -p "$CONF_DIR"
  dev_files
  local conf="$CONF_DIR/rabbitmq.conf"
  {
    echo "# written by scripts/svc-rabbitmq.sh conf; plain AMQP stays on loopback (RABBITMQ_NODE_IP_ADDRESS)"
    echo "loopback_users.guest = true"
    if [ "$TLS" = 1 ]; then
      [ -s "$CERTS/broker.pem" ] || "$ROOT/scripts/certs.sh" --dir "$CERTS" >/dev/null
      local tlsdir="$CONF_DIR/tls" group=root
      id rabbitmq >/dev/null 2>&1 && group=rabbitmq
      mkdir -p "$tlsdir"
      install -m 644 "$CERTS/ca.pem" "$tlsdir/ca.pem"
      install -m 644 "$CERTS/broker.pem" "$tlsdir/broker.pem"
      install -m 640 -g "$group" "$CERTS/broker.key" "$tlsdir/broker.key"
      chgrp "$group" "$tlsdir" && chmod 750 "$tlsdir"
      echo "listeners.ssl.default = $TLS_BIND:$TLS_PORT"
      echo "ssl_options.cacertfile = $tlsdir/ca.pem"
      echo "ssl_options.certfile = $tlsdir/broker.pem"
      echo "ssl_options.keyfile = $tlsdir/broker.key"
      echo "ssl_options.verify = verify_peer"
      echo "ssl_options.fail_if_no_peer_cert = true"
      echo "ssl_options.versions.1 = tlsv1.3"
      echo "ssl_options.versions.2 = tlsv1.2"
    fi
  } >"$conf.tmp"
  mv "$conf.tmp" "$conf"
  # Erlang distribution (rabbitmqctl's channel to the node) on loopback only, like epmd.
  echo "[{kernel, [{inet_dist_use_interface, {127,0,0,1}}]}]." >"$CONF_DIR/advanced.config"
  export RABBITMQ_CONFIG_FILE="$conf" RABBITMQ_ADVANCED_CONFIG_FILE="$CONF_DIR/advanced.config"
  echo "rabbitmq: config in $conf${TLS:+ (TLS on $TLS_BIND:$TLS_PORT: $([ "$TLS" = 1 ] && echo on || echo off))}" >&2
}

tls_open() { (exec 3<>"/dev/tcp/${TLS_BIND/0.0.0.0/127.0.0.1}/$TLS_PORT") 2>/dev/null; }

# Attached to a broker someone else started: one line when its certificate does not verify against the
# machine's CA (the fleet processes of this clone would fail TLS verification), and how to fix it.
ca_check() {
  [ "$TLS" = 1 ] && tls_open || return 0
  CRAWLFLEET_RABBITMQ_CERTS="$CERTS" CRAWLFLEET_RABBITMQ_TLS_PORT="$TLS_PORT" CRAWLFLEET_RABBITMQ_TLS_BIND="$TLS_BIND" \
    "$ROOT/scripts/fleet-files.sh" check || true
}

do_start() {
  installed || do_install
  if amqp_ready; then
    echo "rabbitmq: running"
    dev_files
    dev_users
    if [ "$TLS" = 1 ] && ! tls_open; then
      echo "rabbitmq: no TLS listener on $TLS_PORT yet: it comes with the broker's next start ($0 conf; stop; start)" >&2
    fi
    ca_check
    return 0
  fi
  if ! port_open; then
    do_conf
    rabbitmq-server -detached
  fi
  wait_ready
  dev_users
  echo "rabbitmq: running on 127.0.0.1:$PORT"
}

do_stop() {
  installed || return 0
  if port_open; then
    rabbitmqctl -q stop >/dev/null 2>&1 || true
  fi
  echo "rabbitmq: stopped"
}

do_status() {
  if amqp_ready; then
    echo "rabbitmq: running$(tls_open && echo ", TLS on $TLS_PORT" || echo ", no TLS listener (applies at next start)")"
    return 0
  fi
  echo "rabbitmq: not running"; return 3
}

NAP_PID=""
nap() { sleep "$1" & NAP_PID=$!; wait "$NAP_PID" || true; NAP_PID=""; }  # a sleep a trap can cut short

do_run() {
  if port_open; then
    # Already running (e.g. `make services`): stay in the foreground while it is up, as honcho expects;
    # exit 1 when it goes away, 0 on TERM/INT (the broker keeps running: we did not start it).
    echo "rabbitmq: already running on 127.0.0.1:$PORT; attached, watching it"
    dev_files
    dev_users
    ca_check
    trap 'echo "rabbitmq: detached; the broker on 127.0.0.1:$PORT keeps running"; [ -z "$NAP_PID" ] || kill "$NAP_PID" 2>/dev/null; exit 0' TERM INT
    while port_open; do nap 5; done
    echo "rabbitmq: went away" >&2
    exit 1
  fi
  installed || do_install
  do_conf
  echo "rabbitmq: starting on 127.0.0.1:$PORT in the foreground"
  # The dev stack's users once it answers (a waiter beside the broker; the broker replaces this shell).
  ( wait_ready >/dev/null 2>&1 && dev_users ) &
  exec rabbitmq-server
}

case "${1:-}" in
  install) do_install ;;
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  run) do_run ;;
  conf) do_conf; echo "$CONF_DIR/rabbitmq.conf" ;;
  *) echo "usage: $0 install|start|stop|status|run|conf" >&2; exit 2 ;;
esac
