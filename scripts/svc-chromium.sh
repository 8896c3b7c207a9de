#!/usr/bin/env bash
# Headless Chromium for the report rendering test (tests/integration/test_report*.py).
# install: Debian's `chromium` package if no chromium binary is on PATH (apt-get update first on a fresh
# machine). Chromium is started per test, so start/stop/status have nothing to manage.
# Idempotent and fast when already installed.
set -euo pipefail
action="${1:-status}"

have_chromium() { command -v chromium >/dev/null 2>&1; }

case "$action" in
  install)
    if have_chromium; then
      exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Other services install at the same time on a shared machine: wait for the dpkg lock, not fail.
    apt_opts=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
    apt-get "${apt_opts[@]}" update -qq
    apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends chromium fonts-dejavu-core
    have_chromium || { echo "svc-chromium: chromium still missing after install" >&2; exit 1; }
    ;;
  start | stop)
    : # nothing long-running: each test launches its own headless chromium
    ;;
  status)
    if have_chromium; then
      chromium --version 2>/dev/null || echo "chromium: installed"
    else
      echo "chromium: not installed"
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 install|start|stop|status" >&2
    exit 2
    ;;
esac
