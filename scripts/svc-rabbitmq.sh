#!/usr/bin/env bash
# RabbitMQ for fleet mode (#6): install | start | stop | status | run.
#
# Idempotent and fast when already done. Debian's rabbitmq-server is used as is (guest/guest on
# 127.0.0.1:5672). `rabbitmqctl` starts an Erlang VM (~1 s CPU per call), so readiness is polled
# sparingly: first the TCP port (cheap), then `rabbitmqctl status` once or twice.
# `run` keeps RabbitMQ in the foreground, for honcho (Procfile) and containers: it attaches to a broker
# already listening on the port (watches it; exits 1 when it goes away, 0 on TERM/INT, leaving it
# running), or else execs rabbitmq-server.
set -euo pipefail

PORT="${CRAWLFLEET_RABBITMQ_PORT:-5672}"
WAIT_S="${CRAWLFLEET_RABBITMQ_WAIT_S:-90}"
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

do_start() {
  installed || do_install
  if amqp_ready; then echo "rabbitmq: running"; return 0; fi
  if ! port_open; then
    rabbitmq-server -detached
  fi
  wait_ready
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
  if amqp_ready; then echo "rabbitmq: running"; return 0; fi
  echo "rabbitmq: not running"; return 3
}

NAP_PID=""
nap() { sleep "$1" & NAP_PID=$!; wait "$NAP_PID" || true; NAP_PID=""; }  # a sleep a trap can cut short

do_run() {
  if port_open; then
    # Already running (e.g. `make services`): stay in the foreground while it is up, as honcho expects;
    # exit 1 when it goes away, 0 on TERM/INT (the broker keeps running: we did not start it).
    echo "rabbitmq: already running on 127.0.0.1:$PORT; attached, watching it"
    trap 'echo "rabbitmq: detached; the broker on 127.0.0.1:$PORT keeps running"; [ -z "$NAP_PID" ] || kill "$NAP_PID" 2>/dev/null; exit 0' TERM INT
    while port_open; do nap 5; done
    echo "rabbitmq: went away" >&2
    exit 1
  fi
  installed || do_install
  echo "rabbitmq: starting on 127.0.0.1:$PORT in the foreground"
  exec rabbitmq-server
}

case "${1:-}" in
  install) do_install ;;
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  run) do_run ;;
  *) echo "usage: $0 install|start|stop|status|run" >&2; exit 2 ;;
esac
