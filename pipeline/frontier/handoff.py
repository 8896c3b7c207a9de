"""Whole hosts leaving one frontier and joining another: S5's transfer between dispatcher shards. Pure.

A host moves with its politeness state (its clock, its address, the pages it has given), never split: a
leased host never moves (its lease ends in the frontier that made it), and its URLs never travel, they are
PENDING in the store and the new owner refills the host from there.

- ``tail``: the hosts a shard gives up first, S5's "surplus from the local queue's tail": waiting hosts
  from the back of the queue (their URLs are in the store only), then idle active hosts whose clocks open
  last; whole hosts until they hold ``urls`` pending URLs.
- ``hand_off``: take one idle host out (``Frontier.forget``), as a ``Handed``;
- ``take_in``: make a host arriving from elsewhere this frontier's, with its clock and address;
- ``carry``: the clock and address of a host arriving, for a host the frontier made already.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from pipeline.frontier.frontier import Frontier
from pipeline.frontier.hoststate import HostState


@dataclass(frozen=True, slots=True)
class Handed:
    """One host as it travels: its pending count (a hint; the store is the truth), the earliest time it may
    be contacted again on the giver's clock, its address and the pages it has given."""

    host: str
    pending: int
    not_before: float
    ip: str = ""
    issued: int = 0


def tail(frontier: Frontier, urls: int, *, skip: Container[str] = frozenset(), below: float = float("inf")) -> list[str]:
    """Hosts to give up, whole, from the tail of the local queue, until they hold at least ``urls`` pending
    URLs (fewer when the frontier has no more idle hosts with pending URLs). ``skip``: hosts not to move
    (a refill read in flight); ``below``: only hosts with fewer pending URLs than this move."""
    out: list[str] = []
    total = 0

    def movable(hs: HostState) -> bool:
        return 0 < hs.pending < below and not hs.leased_to and hs.host not in skip

    for hs in frontier.at_work.waiting_tail():
        if total >= urls:
            return out
        if movable(hs):
            out.append(hs.host)
            total += hs.pending
    if total >= urls:
        return out
    idle = sorted((hs for hs in frontier.at_work if movable(hs)), key=lambda hs: -hs.next_allowed)
    for hs in idle:
        if total >= urls:
            break
        out.append(hs.host)
        total += hs.pending
    return out


def hand_off(frontier: Frontier, host: str) -> Handed | None:
    """Take idle ``host`` out of ``frontier``; None when it is unknown or leased (it stays)."""
    hs = frontier.forget(host)
    if hs is None:
        return None
    return Handed(host, hs.pending, hs.next_allowed, hs.ip, hs.issued)


def take_in(frontier: Frontier, h: Handed) -> bool:
    """Make ``h`` this frontier's: its pending URLs refill from the store; its clock and address come with
    it (``not_before`` on this frontier's clock). False when the host cap refuses it (its URLs stay
    PENDING, never leased), as ``Frontier.restore`` does."""
    hs = frontier.host(h.host)
    if hs is not None and hs.leased_to:
        frontier.add_pending(h.host, h.pending)  # cannot happen for a host we did not own; stay safe
        return True
    if hs is None or hs.pending == 0:
        fresh = frontier.restore(h.host, 0)  # makes the state, so the page count is set before the URLs come
        hs = frontier.host(h.host)
        if hs is None:
            return fresh
    carry(frontier, h)
    if h.pending > 0:
        if frontier.capped(h.host) and not frontier.limits.recrawl:
            return False
        frontier.add_pending(h.host, h.pending)
    return True


def carry(frontier: Frontier, h: Handed) -> None:
    """Give a host this frontier holds already the politeness state ``h`` brought (its clock, address and
    page count); its pending URLs are not touched (the caller counted them, or the store's re-read did)."""
    hs = frontier.host(h.host)
    if hs is None:
        return
    hs.issued = max(hs.issued, h.issued)
    frontier.hold(h.host, h.not_before)
    if h.ip and not hs.ip:
        hs.ip = h.ip
