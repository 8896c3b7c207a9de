"""Link-jobs rounds shared by every ``crawlfleet links`` process of a crawl, on any machine, through its store.

A **round** is a micro-batch of closed segments run through the link jobs under one id. Its record and
claims live in the crawl's store (``Store.swap_meta``: atomic across machines), so several processes
share the work and none merges a segment twice:

- ``links:seg:NODE/NAME`` -> round id: a segment's **claim**, taken by a swap from absent, so exactly
  one round ever holds a segment;
- ``links:round:ID`` -> ``{"segments", "state", "mid"}``: the round; ``claiming`` while its owner claims
  candidates, ``fixed`` once its segments are final, ``merging`` once its merge began, under merge id
  ``mid``;
- ``lease:links:round:ID`` (``pipeline.storage.leases``): who runs the round. An owner that dies leaves
  the lease to expire; another process takes the round over and runs it again with the same segments
  and merge id, so its in-link counts are written once (the store tags them per merge id);
- ``lease:links:merge``: merges go one at a time across the fleet, in the order of their merge ids (the
  HBase store's folded in-link cells need ids that sort in merge order: ``hbase_inlinks``). The holder
  first finishes a merge a dead holder left ``merging``, then gives its own round the next merge id.

Extraction needs no lease beyond the round's own: processes extract different rounds at once. When a
round is done (reported to the dispatcher, its segments retired) its claims, record and lease are
deleted. Pure but for the store; the clock comes from the ``Leases``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.storage.base import Store
from pipeline.storage.leases import PREFIX as LEASE_PREFIX
from pipeline.storage.leases import Lease, Leases

if TYPE_CHECKING:
    from jobs.jobrun import JobOutput

SEG = "links:seg:"
ROUND = "links:round:"
LAST_MID = "links:last-mid"
MERGE = "links:merge"
CLAIMING, FIXED, MERGING = "claiming", "fixed", "merging"


def round_id(ns: int) -> str:
    """An id that sorts by ``ns`` (wall-clock nanoseconds), in the form ``hbase_inlinks.ordered`` takes for
    ids that sort in merge order; a random tail keeps two processes' ids apart."""
    return f"r{ns:020d}{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Round:
    """A round: its id, its segments (``NODE/NAME`` keys), its merge id once its merge began ("" before)."""

    id: str
    segments: tuple[str, ...]
    mid: str = ""


class RoundBook:
    def __init__(self, store: Store, leases: Leases) -> None:
        self.store = store
        self.leases = leases

    # --- records ----------------------------------------------------------------------------------
    def _read(self, rid: str) -> tuple[dict[str, object] | None, str | None]:
        raw = self.store.get_meta(ROUND + rid)
        try:
            obj = json.loads(raw) if raw else None
        except ValueError:
            obj = None
        return (obj if isinstance(obj, dict) else None), raw

    def _write(self, rid: str, raw: str | None, segments: Sequence[str], state: str, mid: str = "") -> str | None:
        """Swap the round's record from ``raw``; the new raw text, or None when someone else changed it."""
        new = json.dumps({"segments": list(segments), "state": state, "mid": mid}, separators=(",", ":"))
        return new if self.store.swap_meta(ROUND + rid, raw, new) else None

    def claims(self) -> dict[str, str]:
        """Every claimed, unretired segment -> its round id (one scan: only live segments have claims)."""
        return {key.removeprefix(SEG): rid for key, rid in self.store.scan_meta(SEG)}

    # --- taking rounds ------------------------------------------------------------------------------
    def open(self, candidates: Sequence[str]) -> tuple[Round, Lease] | None:
        """A new round over the ``candidates`` this process manages to claim (another process may claim
        some first); None when it claims none."""
        rid = round_id(time.time_ns())
        lease = self.leases.acquire(ROUND + rid)
        raw = self._write(rid, None, candidates, CLAIMING)
        if lease is None or raw is None:  # an id collision: never in practice
            return None
        return self._fix(rid, raw, candidates, lease)

    def _fix(self, rid: str, raw: str, candidates: Sequence[str], lease: Lease) -> tuple[Round, Lease] | None:
        mine = [key for key in candidates if self._claim(key, rid)]
        if not mine:
            self.forget(Round(rid, ()), lease)
            return None
        if self._write(rid, raw, mine, FIXED) is None:
            return None  # taken over meanwhile (we were paused past the lease): the new owner runs it
        return Round(rid, tuple(mine)), lease

    def _claim(self, key: str, rid: str) -> bool:
        if self.store.swap_meta(SEG + key, None, rid):
            return True
        return self.store.get_meta(SEG + key) == rid  # a claim whose reply was lost, or ours from before

    def orphans(self) -> list[str]:
        """Ids of unfinished rounds nobody holds (their owner died), oldest first."""
        held = {key.removeprefix(LEASE_PREFIX + ROUND): Lease.decode(key, raw)
                for key, raw in self.store.scan_meta(LEASE_PREFIX + ROUND)}  # fmt: skip
        rounds = sorted(key.removeprefix(ROUND) for key, _ in self.store.scan_meta(ROUND))
        return [rid for rid in rounds if self.leases.free(held.get(rid))]

    def take_over(self, rid: str) -> tuple[Round, Lease] | None:
        """Run a dead owner's round: the same segments, the same merge id if its merge began. A round still
        ``claiming`` claims what it listed and can still get."""
        lease = self.leases.acquire(ROUND + rid)
        if lease is None:
            return None
        obj, raw = self._read(rid)
        if obj is None or raw is None:
            self.leases.release(lease)
            return None
        listed = obj.get("segments")
        segments = [k for k in listed if isinstance(k, str)] if isinstance(listed, list) else []
        if obj.get("state") == CLAIMING:
            return self._fix(rid, raw, segments, lease)
        return Round(rid, tuple(segments), str(obj.get("mid") or "")), lease

    # --- merging --------------------------------------------------------------------------------------
    def merge_lease(self) -> Lease | None:
        return self.leases.acquire(MERGE)

    def merging(self) -> list[str]:
        """Rounds whose merge began and did not finish (in merge-id order): the merge lease's holder owes them."""
        found = []
        for key, raw in self.store.scan_meta(ROUND):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("state") == MERGING:
                found.append((str(obj.get("mid") or ""), key.removeprefix(ROUND)))
        return [rid for _, rid in sorted(found)]

    def begin_merge(self, rnd: Round, lease: Lease) -> Round | None:
        """Give ``rnd`` the next merge id (kept if it has one) and mark it merging; call holding the merge
        lease. None when the round is no longer ours."""
        if rnd.mid:
            return rnd
        obj, raw = self._read(rnd.id)
        if obj is None or not self.leases.valid(lease):
            return None
        if obj.get("state") == MERGING and obj.get("mid"):
            return Round(rnd.id, rnd.segments, str(obj["mid"]))
        last = self.store.get_meta(LAST_MID) or ""
        floor = int(last[1:21]) + 1 if last[1:21].isdigit() else 0
        mid = round_id(max(time.time_ns(), floor))
        if self._write(rnd.id, raw, rnd.segments, MERGING, mid) is None:
            return None
        self.store.put_meta(LAST_MID, mid)
        return Round(rnd.id, rnd.segments, mid)

    def forget(self, rnd: Round, lease: Lease) -> None:
        """The round is done (reported, its segments retired): drop its claims, record and lease."""
        self.store.delete_meta([*(SEG + key for key in rnd.segments), ROUND + rnd.id])
        self.leases.release(lease)
        self.store.delete_meta([LEASE_PREFIX + ROUND + rnd.id])


@dataclass(slots=True)
class Held:
    """A round a service holds: its lease, and (once extracted) the extract job's output."""

    round: Round
    lease: Lease
    started: float
    future: Future[JobOutput] | None = None
    extracted: JobOutput | None = None
