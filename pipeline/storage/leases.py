"""Owner leases: one process at a time owns a named thing (a link-jobs round, a dispatcher shard).

A lease is a shared record in the crawl's store (``Store.swap_meta``, atomic across machines: Thrift1's
``checkAndPut`` on HBase, a transaction on SQLite) under ``lease:NAME``, holding the owner, a generation and
a wall-clock deadline. Taking a lease that is free or expired bumps the generation, so work fenced by the
generation it was started under can tell it was taken over. The holder renews before the deadline; a
holder that stops renewing (killed, paused, cut off) loses the lease ``ttl_s`` after its last renewal.

Clocks of two machines differ: a holder treats its lease as valid only until ``skew_s`` before the
deadline, and another process takes it only ``skew_s`` after it, so with clocks within ``skew_s`` of each
other the two never both act as owner. Pure apart from the store; the clock is injected.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.storage.base import Store

log = logging.getLogger(__name__)

PREFIX = "lease:"


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as its record says: ``until`` is wall-clock seconds (0 = released)."""

    name: str
    owner: str
    gen: int
    until: float
    token: str

    def encode(self) -> str:
        return json.dumps({"owner": self.owner, "gen": self.gen, "until": self.until, "token": self.token},
                          sort_keys=True, separators=(",", ":"))  # fmt: skip

    @classmethod
    def decode(cls, name: str, text: str | None) -> Lease | None:
        if not text:
            return None
        try:
            obj = json.loads(text)
            return cls(name, str(obj["owner"]), int(obj["gen"]), float(obj["until"]), str(obj["token"]))
        except (ValueError, KeyError, TypeError):
            return None  # not a lease record: treated as absent, and overwritten only through a swap


class Leases:
    """Leases named in one store for one ``owner`` (a process: its host, pid and a random tail)."""

    def __init__(
        self,
        store: Store,
        *,
        owner: str,
        ttl_s: float = 30.0,
        skew_s: float = 2.0,
        clock: Callable[[], float] = time.time,
        token: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        if ttl_s <= 2 * skew_s:
            raise ValueError(f"lease ttl_s ({ttl_s}) must exceed twice skew_s ({skew_s})")
        self.store = store
        self.owner = owner
        self.ttl_s = ttl_s
        self.skew_s = skew_s
        self.clock = clock
        self._token = token

    def holder(self, name: str) -> tuple[Lease | None, str | None]:
        """The lease record of ``name`` and its raw text (for a swap against it)."""
        raw = self.store.get_meta(PREFIX + name)
        return Lease.decode(name, raw), raw

    def free(self, lease: Lease | None) -> bool:
        """No valid holder: never taken, released, or ``skew_s`` past its deadline."""
        return lease is None or lease.until + self.skew_s <= self.clock()

    def valid(self, lease: Lease) -> bool:
        """The holder's own view: still owned, with ``skew_s`` to spare (a fence checks this before acting)."""
        return self.clock() < lease.until - self.skew_s

    def acquire(self, name: str, *, expect: Lease | None = None) -> Lease | None:
        """Take ``name`` when it is free or already ours; None when another process holds it. A lease that
        changes hands gets the next generation. With ``expect`` (a record read earlier, on which the caller
        decided to take it), only while the record is still that one: None once anyone has written it since."""
        current, raw = self.holder(name)
        if expect is not None and (current is None or (current.token, current.gen) != (expect.token, expect.gen)):
            return None
        if current is not None and current.owner == self.owner and current.until > 0:
            return self._swap(name, raw, current.gen)
        if not self.free(current):
            return None
        return self._swap(name, raw, (current.gen if current else 0) + 1)

    def renew(self, lease: Lease) -> Lease | None:
        """Push the deadline out; None when the lease is no longer ours (taken over, or never was)."""
        current, raw = self.holder(lease.name)
        if current is None or current.token != lease.token or current.gen != lease.gen:
            return None
        return self._swap(lease.name, raw, lease.gen)

    def release(self, lease: Lease) -> None:
        """Give the lease up now (deadline 0, same generation), if it is still ours."""
        current, raw = self.holder(lease.name)
        if current is not None and current.token == lease.token:
            gone = Lease(lease.name, lease.owner, lease.gen, 0.0, self._token())
            self.store.swap_meta(PREFIX + lease.name, raw, gone.encode())

    def _swap(self, name: str, raw: str | None, gen: int) -> Lease | None:
        """Write a new record of ours over ``raw``; a swap that reports failure but whose record is ours
        (its reply was lost and the retry found it done) counts as done."""
        new = Lease(name, self.owner, gen, self.clock() + self.ttl_s, self._token())
        if self.store.swap_meta(PREFIX + name, raw, new.encode()):
            return new
        now, _ = self.holder(name)
        return new if now is not None and now.token == new.token else None


class LeaseKeeper:
    """Renews leases on a thread of its own (with a store connection of its own) while the holder blocks in
    a long call, e.g. a cluster job: ``with LeaseKeeper(open_store, leases, [a, b]) as keeper: ...``, then
    ``keeper.current(a)`` is the renewed lease, or None if it was lost meanwhile (a fence: do not act)."""

    def __init__(self, open_store: Callable[[], Store], template: Leases, held: list[Lease]) -> None:
        self._open = open_store
        self._template = template
        self._held = {lease.name: lease for lease in held}
        self._lost: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def current(self, lease: Lease) -> Lease | None:
        return None if lease.name in self._lost else self._held.get(lease.name, lease)

    def _run(self) -> None:
        t = self._template
        store = self._open()
        try:
            leases = Leases(store, owner=t.owner, ttl_s=t.ttl_s, skew_s=t.skew_s, clock=t.clock, token=t._token)
            while not self._stop.wait(t.ttl_s / 3):
                for name, lease in list(self._held.items()):
                    if name in self._lost:
                        continue
                    try:
                        renewed = leases.renew(lease)
                    except Exception as exc:  # a store hiccup: the next period tries again (the holder's
                        log.warning("lease %s: renewal failed (%s); trying again", name, exc)  # fence waits)
                        continue
                    if renewed is None:
                        self._lost.add(name)
                    else:
                        self._held[name] = renewed
        finally:
            store.close()
