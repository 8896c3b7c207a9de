"""What a killed fleet dispatcher granted in the current quota minute, so that its successor keeps S1.

S1 counts, per service, the URLs granted this minute (``n``) and per fetcher the URLs it was given
(``r``); both live in the dispatcher's memory. A dispatcher resumed within the same minute would
start them at 0 and grant the minute's quota a second time. Its predecessor wrote an ``issue`` line
for every batch to ``fleet-events.jsonl`` *before* sending it (line-buffered: the line is in the
kernel before the batch is on the broker, so a SIGKILL cannot lose it), with the fetcher and the
number of URLs: the sum of those lines in the current minute is what was granted.

The lines carry wall time and the minute is read from the resumed dispatcher's clock; a predecessor
whose clock lagged the wall (time it could not hear the fleet) may have counted some of those grants
in the minute before, so this may over-count, never under-count: the quota holds.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pipeline.dispatch.admission import minute_of


def granted_this_minute(events: Path, now: float) -> Counter[str]:
    """URLs per fetcher that ``issue`` lines of ``events`` granted in the minute of ``now``."""
    out: Counter[str] = Counter()
    if not events.exists():
        return out
    minute = minute_of(now)
    with open(events, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("}\n"):
                continue  # torn by the kill: that batch was never sent
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("ev") == "issue" and minute_of(float(ev.get("t", 0.0))) == minute:
                out[str(ev.get("vfid", ""))] += int(ev.get("n", 0))
    return out
