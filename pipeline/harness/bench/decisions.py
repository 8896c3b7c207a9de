"""The fleet dispatcher's decision path at N simulated nodes: the code ``crawlfleet dispatcher`` runs.

A real ``FleetDispatcher`` over a real ``CrawlCore`` (SQLite store in a temporary directory), with the
broker's socket taken away (``NullBroker``: batches are encoded and signed as for the broker, then
dropped; no queue exists). Everything it hears goes through its own inbox, as bytes a node or the link
jobs would send, and is handled by its own methods:

- **heartbeats**: one ``NodeHeartbeat`` per node (``slots`` virtual fetchers each, the worker's default),
  through ``_process_inbox``: ``FleetNodes.heard`` and the S1 heartbeat of each virtual fetcher.
- **a turn**: the replies of the ``R`` oldest batches out (``replies.reply_text``: one JSON reply per
  batch, results without bodies, the report) and a links report naming ``R`` batches' worth of new URLs
  (written to the store first, as the link jobs do; four hosts of 16 URLs per batch), handled by
  ``_process_inbox`` (the *completion* path: decode, de-duplicate, ``CrawlCore.on_result``,
  ``on_batch_done``, the links report); then ``_dispatch`` (the *decision* path: ``FleetNodes.choose``,
  ``CrawlCore.next_batch`` -> ``Dispatcher.offer``, the batch's bookkeeping and its encoding) until S1
  says no or nothing is leasable. Turns alternate R = 1 and R = 4, so a round's cost splits into a part
  per batch issued and the closing attempt that issues nothing: ``round = a*R + b``.
- **ticks**: ``_tick`` (liveness, leases, the serial table, the stats row).

Nodes report p = 10^6 URLs/s: the bench issues batches far faster than any node fetches them, and S1
would rightly answer no within the first minute; the choice computes u = p*s + q - r for every node
all the same. A batch asks for k = 64 URLs (n_min = n_max = k); a round issues what the frontier has
ready (a refill may come a round late), so per-page figures divide by the pages actually issued.
Every figure is CPU time of this process (``time.process_time``: a neighbour's load on a shared machine
slows the run but does not add to it), the unit of ``bench fleet``'s ``dispatcher_cpu_*`` figures too.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fetchers.records import FetchResult
from fetchers.report import BatchReport
from pipeline.dispatch.sizing import local_slots
from pipeline.settings import Settings
from pipeline.storage.base import Store, UrlRecord
from pipeline.storage.factory import from_settings
from pipeline.transport.dispatcher.service import FleetDispatcher
from pipeline.transport.wire.messages import NodeHeartbeat, encode
from pipeline.transport.wire.msgauth import MessageKeys
from pipeline.transport.wire.replies import LinksReport, reply_text
from pipeline.transport.wire.session import Inbound
from pipeline.urls import fingerprint

K = 64  # URLs per batch (n_min = n_max = k)
HOSTS_PER_BATCH = 4  # a lease takes at most k // 4 URLs of one host
RATE = 1e6  # the p every node reports (see the module docstring)


@dataclass(slots=True)
class _Message:
    body: bytes
    content_type: str = "application/json"
    content_encoding: str = "utf-8"


class _Producer:
    def __init__(self) -> None:
        self.published = 0

    def publish(self, body: bytes, **_: Any) -> None:
        self.published += 1


class NullBroker:
    """What ``FleetDispatcher`` uses of its broker session, without a broker: always connected, never
    paused, queues neither declared nor purged, every publish taken (``send_task`` signs the message and
    hands it to ``producer.publish``)."""

    connected = True

    def __init__(self, keys: MessageKeys) -> None:
        self.keys = keys
        self.producer = _Producer()
        self.inbox: list[Inbound] = []
        self.dead_lettered = 0

    def paused_now(self) -> float:
        return 0.0

    def note_deafness(self) -> None:
        return None

    def declare_fetch_queue(self, node: str) -> None:
        return None

    def purge_fetch_queue(self, node: str) -> int:
        return 0

    def ack_through(self, message: Any) -> None:
        return None

    def dead_letter(self, item: Inbound, reason: str) -> None:
        raise RuntimeError(f"the bench sent a bad message: {reason}")

    def lost(self, exc: BaseException) -> None:
        raise exc


def _item(kind: str, obj: dict[str, Any]) -> Inbound:
    return Inbound(kind, _Message(encode(obj).body))  # type: ignore[arg-type]


@dataclass(slots=True)
class Samples:
    """CPU seconds of each part, and what each did."""

    heartbeat: list[float] = field(default_factory=list)  # per heartbeat of a known node
    completion: list[float] = field(default_factory=list)  # per page replied, one value per turn
    fit: list[tuple[int, float]] = field(default_factory=list)  # (batches a round issued, its seconds)
    tick: list[float] = field(default_factory=list)
    batches: int = 0
    pages: int = 0


def bench_settings(out: Path) -> Settings:
    return Settings().with_overrides({
        "dispatch": {"n_min": K, "n_max": K, "k": K, "serial_check": False},
        "store": {"kind": "sqlite"},
    })  # fmt: skip


class Harness:
    """One dispatcher with ``nodes`` nodes of ``slots`` virtual fetchers, in ``out``."""

    def __init__(self, nodes: int, out: Path, *, slots: int, settings: Settings | None = None) -> None:
        self.settings = settings or bench_settings(out)
        self.nodes = [f"n{i:05d}" for i in range(nodes)]
        self.slots = slots
        self.d = FleetDispatcher(self.settings, out_dir=out, seeds=["http://h0.bench.test/"])
        self.broker = NullBroker(self.d.session.keys)
        self.d.session = self.broker
        self.d._events = open(out / "fleet-events.jsonl", "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.store = self.open_store(out)
        self.before_open()
        self.d._open_crawl(self.store)
        self._host = 1
        self._segment = 0
        self._sent_at = 1.0
        self._heard: dict[str, float] = {}

    def open_store(self, out: Path) -> Store:
        return from_settings(self.settings.store, out / "crawl.db")

    def before_open(self) -> None:
        """Called between the store's opening and the crawl's (a dispatcher shard joins its peers here)."""

    def route(self, hosts: dict[str, int]) -> None:
        """What the link jobs do with a round's new hosts before their report (sharded: claim them)."""

    def close(self) -> None:
        if self.d.core is not None:
            self.d.core.close()
        self.store.close()
        if self.d._events is not None:
            self.d._events.close()

    def heartbeat(self, node: str) -> Inbound:
        self._sent_at += 1e-3
        self._heard[node] = time.perf_counter()
        hb = NodeHeartbeat(node, "inc-1", self._sent_at, 1000, 0, RATE, 256, self.slots, 0, address=f"fetch.{node}")
        return _item("heartbeat", hb.to_json())

    def new_urls(self, batches: int) -> Inbound:
        """``batches`` batches' worth of new URLs, written to the store, and the links report naming them."""
        per_host = K // HOSTS_PER_BATCH
        records, hosts = [], {}
        for _ in range(batches * HOSTS_PER_BATCH):
            host = f"h{self._host}.bench.test"
            self._host += 1
            hosts[host] = per_host
            records += [UrlRecord(u, fingerprint(u), host, 1) for u in (f"http://{host}/p{j}" for j in range(per_host))]
        self.store.add_urls(records)
        self.route(hosts)
        return _item("results", LinksReport((f"seg-{self._segment}",), hosts).to_json())

    def due(self) -> list[str]:
        """The nodes whose next heartbeat is due (every ``heartbeat_s``)."""
        now = time.perf_counter()
        return [n for n in self.nodes if now - self._heard[n] >= self.settings.dispatch.heartbeat_s]

    def replies(self, count: int) -> tuple[list[Inbound], int]:
        """The replies of the ``count`` oldest batches out, as their nodes send them, and their pages."""
        out, pages = [], 0
        for serial in sorted(self.d._issued)[:count]:
            issued = self.d._issued[serial]
            batch = issued.batch
            results = [FetchResult(url=t.url, url_id=t.url_id, depth=t.depth, final_url=t.url, status=200,
                                   content_type="text/html", body_bytes=12_000, wire_bytes=12_400, ip="10.0.0.1",
                                   serial=serial, fetcher_id=batch.fetcher_id, fetched_at=time.time())
                       for t in batch.tasks]  # fmt: skip
            self._segment += 1
            report = BatchReport(serial, batch.fetcher_id, len(results), len(results) / 330.0)
            text = reply_text(issued.node, "inc-1", results, report, segment=f"/seg/{issued.node}/s{self._segment}.jsonl")
            out.append(Inbound("results", _Message(text.encode())))  # type: ignore[arg-type]
            pages += len(results)
        return out, pages

    def hear(self, items: Sequence[Inbound]) -> float:
        self.broker.inbox = list(items)
        t = time.process_time()
        self.d._process_inbox()
        return time.process_time() - t

    def dispatch(self) -> tuple[float, int, int]:
        """One dispatch round: its seconds, the batches and the pages it issued."""
        before = set(self.d._issued)
        t = time.process_time()
        self.d._dispatch()
        took = time.process_time() - t
        new = [self.d._issued[s].batch for s in self.d._issued.keys() - before]
        return took, len(new), sum(len(b.tasks) for b in new)


def measure(nodes: int, *, seconds: float, slots: int, out: Path, memory: bool = False) -> dict[str, Any]:
    """Start a dispatcher with ``nodes`` nodes, then time heartbeats, turns and ticks for ``seconds``."""
    h = Harness(nodes, out, slots=slots)
    try:
        return drive(h, seconds=seconds, memory=memory)
    finally:
        h.close()


def drive(h: Harness, *, seconds: float, memory: bool = False) -> dict[str, Any]:
    """Register ``h``'s nodes, then time heartbeats, turns and ticks for ``seconds``; its figures."""
    nodes, slots = len(h.nodes), h.slots
    if memory:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0] if memory else 0
    t0 = time.perf_counter()
    h.hear([h.heartbeat(node) for node in h.nodes])  # the first heartbeat registers a node (not timed)
    start_s = time.perf_counter() - t0
    state = tracemalloc.get_traced_memory()[0] - base if memory else 0
    if memory:
        tracemalloc.stop()
    s = Samples()
    h.hear([h.new_urls(min(nodes, 16))])  # batches kept out: the choice's cost is the nodes', not theirs
    _, s.batches, s.pages = h.dispatch()
    deadline = time.perf_counter() + seconds
    turn = 0
    while time.perf_counter() < deadline or turn < 16 or len(s.heartbeat) < nodes:
        r = 1 if turn % 2 == 0 else 4
        turn += 1
        for node in h.due():  # every node heartbeats every heartbeat_s, as a live fleet does
            s.heartbeat.append(h.hear([h.heartbeat(node)]))
        replies, pages = h.replies(r)
        s.completion.append(h.hear([h.new_urls(r), *replies]) / max(1, pages))
        took, batches, pages = h.dispatch()
        s.fit.append((batches, took))
        s.batches += batches
        s.pages += pages
    for _ in range(5):
        t = time.process_time()
        h.d._tick()
        s.tick.append(time.process_time() - t)
    out_ = summarize(nodes, slots, s, start_s=start_s, published=h.broker.producer.published)
    if memory:
        out_["state_bytes_per_node"] = round(state / nodes)
    return out_


def _us(xs: Sequence[float]) -> float:
    return round(statistics.median(xs) * 1e6, 2) if xs else float("nan")


def summarize(nodes: int, slots: int, s: Samples, *, start_s: float, published: int) -> dict[str, Any]:
    # A round's seconds = a * (batches it issued) + b, by least squares over every round: a round issues
    # what the frontier has ready (a refill may come a round late), and the fit takes that as it was.
    a, b = statistics.linear_regression([float(x) for x, _ in s.fit], [y for _, y in s.fit])
    batch = s.pages / s.batches if s.batches else float("nan")
    completion = statistics.median(s.completion)
    return {
        "nodes": nodes, "slots_per_node": slots, "virtual_fetchers": nodes * slots, "rounds": len(s.fit),
        "batches_issued": s.batches, "batches_published": published, "pages_per_batch": round(batch, 1),
        "start_s": round(start_s, 2), "heartbeats_timed": len(s.heartbeat),
        "decision_us": round(a * 1e6, 1),  # a: choose + next_batch + issue, per batch issued
        "closing_attempt_us": round(b * 1e6, 1),  # b: the round's last choice, which issues nothing
        "completion_us_per_page": round(completion * 1e6, 2),
        "heartbeat_us": _us(s.heartbeat), "tick_us": _us(s.tick),
        "per_page_us": round(a / batch * 1e6 + completion * 1e6, 2),
    }  # fmt: skip


def run_sizes(sizes: Sequence[int], *, repeats: int, seconds: float, slots: int | None = None) -> dict[str, Any]:
    """``repeats`` rounds over ``sizes`` (interleaved, so a neighbour's load falls on every size alike)."""
    slots = slots or local_slots(Settings())
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    load = [os.getloadavg()]
    for _ in range(repeats):
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix="crawlfleet-decisions-") as tmp:
                runs[n].append(measure(n, seconds=seconds, slots=slots, out=Path(tmp), memory=not runs[n]))
        load.append(os.getloadavg())
    out: dict[str, Any] = {"slots_per_node": slots, "batch_urls": K, "seconds_per_size": seconds, "repeats": repeats,
                           "load_average": [[round(x, 2) for x in la] for la in load]}  # fmt: skip
    for n in sizes:
        out[f"nodes_{n}"] = {"median": _medians(runs[n]), "runs": runs[n]}
    return out


FIGURES = ("decision_us", "closing_attempt_us", "completion_us_per_page", "heartbeat_us", "tick_us", "per_page_us",
           "pages_per_batch")


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs and its spread (max/min)."""
    out: dict[str, Any] = {}
    for name in FIGURES:
        xs = [r[name] for r in runs if r[name] == r[name]]
        if xs:
            out[name] = statistics.median(xs)
            out[f"{name}_spread"] = round(max(xs) / min(xs), 3) if min(xs) > 0 else None
    return out


if __name__ == "__main__":  # a quick look while developing: python -m pipeline.harness.bench.decisions
    print(json.dumps(run_sizes([2, 100], repeats=1, seconds=1.0), indent=2))
