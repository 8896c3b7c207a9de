"""The verdict every fault trial is held to, on its record (pipeline.harness.faults.accounting): judged
from the testbed's access log, the truth, the store and the strike, never from the crawler's word.

- nothing lost: every truth page answered by the server and stored;
- no repeat left unexcused: a URL asked again only if the struck process itself (by its pid) had it in
  flight at the fault or completed it less than ``RECENT_S`` before, and never by a stopped process
  after it was continued;
- robots.txt fetched once per host per crawl.
"""

from __future__ import annotations

from typing import Any


def check(rec: dict[str, Any]) -> None:
    assert rec["lost"] == 0, (rec["lost_unanswered"], rec["lost_unstored"], rec["lost_sample"])
    assert rec["stored_pages"] == rec["truth_pages"]
    assert rec["repeats_unexcused"] == 0, (rec["repeats"], rec["in_flight_repeats"], rec["recent_repeats"],
                                           rec["repeated_sample"])  # fmt: skip
    assert rec["woken_repeats"] == 0, rec["repeated_sample"]
    assert rec["robots_extra"] == 0, rec.get("robots_detail") or rec["robots_sample"]


def check_fetches_nothing(rec: dict[str, Any]) -> None:
    """A struck process that fetches nothing (dispatcher, broker, store, link jobs, parser, resolver):
    the verdict above, and not one repeat of any kind."""
    check(rec)
    assert rec["repeats"] == 0, rec["repeated_sample"]
