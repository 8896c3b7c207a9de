#!/usr/bin/env bash
# Dependency audit of the project venv with pip-audit (PyPI's vulnerability data).
#
#   scripts/audit.sh            audit; exit 1 on any finding not accepted in docs/AUDIT.md
#   scripts/audit.sh --dry-run  list what would be audited (no vulnerability look-ups)
#
# `make test` runs it before pytest, so CI fails on a new, unaccepted advisory.
# - Only the packages installed in .venv are looked up, one request each to PyPI's JSON API (the same
#   registry pip installs them from); crawlfleet itself (editable, not on PyPI) is skipped.
# - Accepted findings are the lines "- accept: <VULN-ID> ..." in docs/AUDIT.md; each becomes --ignore-vuln.
# - The JSON report goes to var/audit/pip-audit.json.
# - If the vulnerability service cannot be reached at all, the audit says so loudly and exits 0 unless
#   CRAWLFLEET_AUDIT_REQUIRED=1: an offline developer can still run the tests; findings always fail.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=".venv/bin/python"
[ -x "$PY" ] || { echo "audit: no .venv (run make test or make demo first)" >&2; exit 2; }
if ! "$PY" -m pip_audit --version >/dev/null 2>&1; then
  echo "audit: installing pip-audit into .venv" >&2
  "$PY" -m pip install -q pip-audit
fi
ignores=()
if [ -f docs/AUDIT.md ]; then
  while read -r id; do ignores+=(--ignore-vuln "$id"); done < <(sed -n 's/^- accept: \([A-Za-z0-9:._-]*\).*/\1/p' docs/AUDIT.md)
fi
mkdir -p var/audit
report=var/audit/pip-audit.json
args=(--vulnerability-service pypi --skip-editable --progress-spinner off --desc on "${ignores[@]}")
if [ "${1:-}" = "--dry-run" ]; then
  exec "$PY" -m pip_audit "${args[@]}" --dry-run
fi
rm -f "$report"
status=0
"$PY" -m pip_audit "${args[@]}" -f json -o "$report" 2>var/audit/pip-audit.err || status=$?
if [ ! -s "$report" ]; then
  # No report at all: pip-audit failed before auditing (typically no route to the vulnerability API).
  echo "audit: NOT RUN, pip-audit produced no report (exit $status):" >&2
  tail -n 3 var/audit/pip-audit.err >&2 || true
  [ "${CRAWLFLEET_AUDIT_REQUIRED:-0}" = "1" ] && exit 1
  exit 0
fi
"$PY" - "$report" <<'PYEOF'
import json, sys
data = json.load(open(sys.argv[1]))
deps = data.get("dependencies", data) if isinstance(data, dict) else data
found = [(d["name"], d["version"], v["id"], ",".join(v.get("fix_versions") or []) or "-")
         for d in deps for v in d.get("vulns", [])]
print(f"audit: {len(deps)} packages, {len(found)} finding(s) not accepted in docs/AUDIT.md")
for name, version, vid, fix in found:
    print(f"  {name} {version}: {vid} (fixed in {fix})")
PYEOF
echo "audit: report in $report (exit $status; $(( ${#ignores[@]} / 2 )) accepted finding(s))" >&2
exit "$status"
