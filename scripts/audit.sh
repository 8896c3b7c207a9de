#!/usr/bin/env bash
# Dependency audit of the project venv with pip-audit (PyPI's vulnerability data).
#
#   scripts/audit.sh            audit; exit 1 on any finding not accepted in docs/AUDIT.md
#   scripts/audit.sh --dry-run  install pip-audit if needed and list what would be audited (no network lookups)
#
# - pip-audit is installed into .venv when missing (it is a tool, not a runtime dependency).
# - crawlfleet itself (editable, not on PyPI) is skipped.
# - Accepted findings are the lines "- accept: <VULN-ID> ..." in docs/AUDIT.md; each becomes --ignore-vuln.
# - The JSON report goes to var/audit/pip-audit.json (also when findings make the exit status 1).
# - Needs HTTPS to pypi.org (the vulnerability API): it is not part of `make test` (see docs/AUDIT.md).
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
args=(--skip-editable --progress-spinner off --desc on "${ignores[@]}")
if [ "${1:-}" = "--dry-run" ]; then
  exec "$PY" -m pip_audit "${args[@]}" --dry-run
fi
status=0
"$PY" -m pip_audit "${args[@]}" -f json -o var/audit/pip-audit.json || status=$?
"$PY" - var/audit/pip-audit.json <<'PYEOF'
import json, sys
data = json.load(open(sys.argv[1]))
deps = data.get("dependencies", data) if isinstance(data, dict) else data
found = [(d["name"], d["version"], v["id"], ",".join(v.get("fix_versions") or []) or "-")
         for d in deps for v in d.get("vulns", [])]
print(f"audit: {len(deps)} packages, {len(found)} finding(s) not accepted in docs/AUDIT.md")
for name, version, vid, fix in found:
    print(f"  {name} {version}: {vid} (fixed in {fix})")
PYEOF
echo "audit: report in var/audit/pip-audit.json (exit $status; $(( ${#ignores[@]} / 2 )) accepted finding(s))" >&2
exit "$status"
