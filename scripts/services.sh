#!/usr/bin/env bash
# Install and start (or stop) every real service the test suite needs.
# Each service has its own script, scripts/svc-<name>.sh, taking: install | start | stop | status.
# The cluster services (s3, hadoop = HDFS + YARN, spark standalone) listen on 127.0.40.1 (docs/FLEET.md,
# "Cluster services on one machine"); each start returns at once when its service already answers.
set -euo pipefail
cd "$(dirname "$0")/.."
action="${1:-up}"
services=(${CRAWLFLEET_SERVICES:-rabbitmq hbase unbound s3 hadoop spark chromium})
for svc in "${services[@]}"; do
  script="scripts/svc-${svc}.sh"
  [ -x "$script" ] || { echo "services: no $script, skipping $svc"; continue; }
  case "$action" in
    up) echo "== $svc: install"; "$script" install; echo "== $svc: start"; "$script" start ;;
    down) "$script" stop || true ;;
    status) "$script" status || true ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
  esac
done
