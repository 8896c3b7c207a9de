#!/usr/bin/env bash
# `make test`'s pytest: the fault trials in a second pytest process beside everything else.
#
# Why two processes: most of a fault trial's time is spent waiting (a killed service restarting, a
# JVM booting, a lease expiring), and run one after the other the tiers took ~50 minutes on a 2-core
# box, past CI's 40. The trials use private services (their own RabbitMQ node, HBase, Thrift server,
# vhosts and table prefixes), so they share nothing the other tiers change. Each process has its own
# basetemp (pytest's rotation of a shared one deletes the other's directories).
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# Temporary directories stay short and outside the checkout (unix socket paths are limited to 108 bytes).
TMP="${TMPDIR:-/tmp}/crawlfleet-tests"
mkdir -p var/test "$TMP"
# Every test's time goes to var/test/*.xml (JUnit XML), the main tier's 25 slowest to the output too.
"$PY" -m pytest -q -rfE -p no:cacheprovider --basetemp="$TMP/faults" --junitxml=var/test/faults.xml tests/faults > var/test/faults.log 2>&1 &
faults_pid=$!
# The end-to-end tier in a third process: its crawls also mostly wait (subprocesses, namespaces, the dev
# stack), and with it the two-process run came near CI's 40 minutes (2026-11-24, 90f39d0). Shared services
# are safe to share: every test has its own vhost, HBase prefix and testbed ports. The whole-system runs of
# many processes (dispatcher shards, the S5 fleet bench's record-and-replay) sit here, not in the main tier:
# it was the longest of the three (42 min on a loaded box on 2026-11-29, this one 21).
"$PY" -m pytest -q -rfE -p no:cacheprovider --basetemp="$TMP/e2e" --junitxml=var/test/e2e.xml tests/e2e > var/test/e2e.log 2>&1 &
e2e_pid=$!
"$PY" -m pytest -q -rfE -p no:cacheprovider --basetemp="$TMP/main" --junitxml=var/test/main.xml --durations=25 --ignore=tests/faults --ignore=tests/e2e tests "$@"
main_rc=$?
wait "$e2e_pid"
e2e_rc=$?
wait "$faults_pid"
faults_rc=$?
echo
echo "== end-to-end tier (tests/e2e), full log in var/test/e2e.log:"
tail -n 25 var/test/e2e.log
echo
echo "== fault trials (tests/faults), full log in var/test/faults.log:"
tail -n 40 var/test/faults.log
if [ "$main_rc" -ne 0 ] || [ "$e2e_rc" -ne 0 ] || [ "$faults_rc" -ne 0 ]; then
    echo
    echo "== failed in the e2e and fault tiers (the other tier's failures are listed above):"
    grep -hE '^(FAILED|ERROR) ' var/test/e2e.log var/test/faults.log || true
    echo "make test: FAILED (tests: exit $main_rc, e2e: exit $e2e_rc, fault trials: exit $faults_rc)"
    exit 1
fi
echo "make test: passed (tests, e2e and fault trials)"
