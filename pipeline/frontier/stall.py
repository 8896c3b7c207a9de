"""Why a frontier that holds pending URLs leases none: a report of its hosts for the log. Pure.

A crawl that never ends because its frontier counts URLs it never offers is the hardest fault to read
after the fact: the process is alive, nothing is out, nothing moves. ``StallWatch`` notices it (pending
URLs, nothing out, and a host whose politeness clock allows it, for ``after_s``) and describes the hosts
as the frontier holds them, so the log of the run that stalled says where the URLs sit.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.hoststate import HostState

HOSTS_SHOWN = 12


def describe(hs: HostState, now: float) -> str:
    """One host as the frontier holds it."""
    flags = "".join(
        c for c, on in (("A", hs.active), ("W", hs.waiting), ("H", hs.in_heap), ("C", hs.complete)) if on
    )
    return (f"{hs.host} pending={hs.pending} window={len(hs.window)} flags={flags or '-'} "
            f"ready_in={hs.next_allowed - now:.1f}s ip={hs.ip or '-'} leased_to={hs.leased_to or '-'}")  # fmt: skip


@dataclass(slots=True)
class StallWatch:
    after_s: float
    _since: float | None = None
    _looked: float = float("-inf")

    def check(self, frontier: Frontier, *, now: float, out: bool) -> str | None:
        """A report when ``frontier`` has held pending URLs for ``after_s`` with nothing ``out`` (no batch
        issued and unanswered) and some host with pending URLs is ready by its clock; else None. The hosts
        are walked at most once per ``after_s`` (so at most one report per period)."""
        if out or frontier.pending <= 0:
            self._since = None
            return None
        if self._since is None:
            self._since = now
        if now - self._since < self.after_s or now - self._looked < self.after_s:
            return None
        self._looked = now  # one walk over the hosts per period, reported or not
        waiting = [hs for hs in frontier.states() if hs.pending > 0 and not hs.leased_to]
        if not any(hs.next_allowed <= now for hs in waiting):
            return None  # politeness holds them all (a long crawl delay): nothing is wrong
        counted = sum(hs.pending for hs in frontier.states())
        shown = sorted(waiting, key=lambda hs: hs.next_allowed)[:HOSTS_SHOWN]
        return (f"{frontier.pending} URLs pending (hosts hold {counted}) and none leased for {now - self._since:.0f}s;"
                f" {frontier.active} hosts active, {frontier.at_work.waiting} waiting, {frontier.leased} URLs leased; "
                + "; ".join(describe(hs, now) for hs in shown))  # fmt: skip
