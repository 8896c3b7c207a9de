"""kombu against pika on the dispatcher's two high-rate AMQP jobs (#18 point 4), on the real broker.

``crawlfleet bench amqp --json``. Everything runs in a private vhost of the broker at ``--broker``
(made with ``rabbitmqctl``, deleted at the end; the shared broker is never restarted).

- **consume**: the nodes' batch replies (``replies.reply_text`` of synthetic FetchResults, ~530 B a
  page; ``--pages`` sizes, 1 = heartbeat-sized) from the service's results queue, prefetch
  ``--prefetch``, pumped and acked as ``session.BrokerSession`` does: wait up to 50 ms, take what
  else is there (up to 2,000), ack the last with ``multiple``. ``kombu``: py-amqp through kombu
  (Connection, Consumer, drain_events). ``pika``: BlockingConnection, basic_consume,
  process_data_events, as shipped (4 KB socket reads); ``pika-256k``: the same with 256 KB reads.
  ``session-kombu`` / ``session-pika``: the dispatcher's session classes themselves (BrokerSession,
  PikaSession on pika's SelectConnection), accounting included. Each chunk is loaded after the
  consumer has connected and before it pumps, so only consuming is timed: messages (and pages) per
  CPU-second of this process (``time.process_time``).
- **publish**: fetch batches (``--urls`` each) as task messages to a node's queue, with publisher
  confirms. ``celery``: Celery's own ``send_task`` (``celery_send`` below, the baseline: what the
  dispatcher used before ``batchsend``) on a kombu producer whose channel waits for each confirm. ``kombu``: the same producer publishing
  ``batchsend.BatchEncoder``'s message. ``pika``: the same bytes with ``basic_publish`` on a
  BlockingChannel in confirm mode (also one round trip each). ``session-pika``:
  ``PikaSession.publish_task``, a pump every ``--burst`` batches, confirms pipelined and all
  taken in before the clock stops. The encoder runs per batch in all but ``celery``. The node's
  queue is purged after every chunk (untimed).

Variants alternate chunk by chunk, so a neighbour's load falls on all of them alike; each figure is
also given as a ratio to the kombu baseline (``celery`` for publishing) of the same run. The consumer
clients themselves are in amqpclients.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika
from kombu import Producer

from fetchers.records import Batch, FetchResult, Timings, UrlTask
from fetchers.report import BatchReport
from pipeline.harness.bench.amqpclients import (
    KombuConsumer,
    PikaConsumer,
    pika_reads,
    read_size,
    session_consumers,
)
from pipeline.settings import FleetSettings
from pipeline.transport.wire import topology
from pipeline.transport.wire.amqp import connection
from pipeline.transport.wire.batchsend import BatchEncoder, publish_kombu, publish_pika
from pipeline.transport.wire.replies import reply_text

SERVICE = "bench"
NODE = "benchnode"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672", help="broker URL without vhost")
    p.add_argument("--messages", type=int, default=20_000, help="reply messages consumed per client and size")
    p.add_argument(
        "--pages", default="1,50,100,200", help="pages per reply, comma-separated (1: heartbeat-sized)"
    )
    p.add_argument(
        "--max-mb", type=float, default=500.0, help="at most this many MB consumed per client and size"
    )
    p.add_argument("--chunk-mb", type=float, default=16.0, help="MB loaded per timed phase")
    p.add_argument("--prefetch", type=int, default=512, help="consumer prefetch (the dispatcher's is 512)")
    p.add_argument("--batches", type=int, default=20_000, help="task messages published per client")
    p.add_argument("--urls", type=int, default=100, help="URLs per published batch")
    p.add_argument("--burst", type=int, default=4, help="session-pika: batches published between two pumps")
    p.add_argument("--only", choices=("consume", "publish"), default=None, help="run one half only")


@contextlib.contextmanager
def private_vhost(base: str) -> Iterator[str]:
    """A vhost of our own on the running broker (``rabbitmqctl``), deleted afterwards."""
    vhost = f"cf-bench-amqp-{uuid.uuid4().hex[:8]}"
    node = os.environ.get("RABBITMQ_NODENAME", "rabbit@localhost")

    def ctl(*args: str) -> None:
        subprocess.run(["rabbitmqctl", "-q", "-n", node, *args], check=True, capture_output=True, timeout=60)

    ctl("add_vhost", vhost)
    try:
        ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield f"{base.rstrip('/')}/{vhost}"
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            ctl("delete_vhost", vhost)


# --- realistic messages -------------------------------------------------------------------------------
def reply_bodies(pages: int, *, variants: int = 8) -> list[bytes]:
    """Batch replies as a node sends them (replies.reply_text), from synthetic results."""
    out = []
    for v in range(variants):
        serial = 1000 + v
        results = []
        for i in range(pages):
            host = f"h{(v * 7 + i) % 40}.site{v}.test"
            url = f"http://{host}/section-{i % 9}/item-{v * pages + i}.html"
            redirects = [url.replace(".html", "/")] if i % 17 == 0 else []
            results.append(FetchResult(
                url=url, url_id=(v * 1_000_003 + i * 7919) % (1 << 62), depth=3, final_url=url,
                redirects=redirects, status=200 if i % 23 else 404, content_type="text/html; charset=utf-8",
                body_bytes=9000 + i * 37, wire_bytes=9400 + i * 37,
                timings=Timings(0.0004, 0.0012, 0.0133 + i / 1e5, 0.0214 + i / 1e5), ip=f"127.0.10.{i % 40 + 1}",
                serial=serial, fetcher_id=f"{NODE}#{v % 8}", fetched_at=1.7e9 + i / 10,
            ))  # fmt: skip
        report = BatchReport(serial, f"{NODE}#{v % 8}", pages, 1.234,
                             host_delays={f"h{k}.site{v}.test": 0.05 for k in range(3)})  # fmt: skip
        seg = f"/srv/crawl/segments/{NODE}/seg-{serial:08d}.jsonl.gz"
        out.append(reply_text(NODE, "inc-1", results, report, segment=seg).encode())
    return out


def batches(n_urls: int, *, variants: int = 8) -> list[Batch]:
    return [Batch(serial=5000 + v, fetcher_id=f"{NODE}#{v}", service=SERVICE, issued_at=1.7e9,
                  tasks=[UrlTask(f"http://h{(v + i) % 40}.site.test/section-{i % 9}/item-{v * n_urls + i}.html",
                                 (v * 1_000_003 + i * 7919) % (1 << 62), 2) for i in range(n_urls)])
            for v in range(variants)]  # fmt: skip


# --- timing: messages per CPU-second ------------------------------------------------------------------
@dataclass(slots=True)
class Tally:
    messages: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def add(self, messages: int, cpu: float, wall: float) -> None:
        self.messages, self.cpu_s, self.wall_s = (
            self.messages + messages,
            self.cpu_s + cpu,
            self.wall_s + wall,
        )

    def rate(self) -> float:
        return self.messages / self.cpu_s if self.cpu_s else 0.0


# --- consumers (the clients: amqpclients.py) -----------------------------------------------------------
def bench_consume(url: str, args: argparse.Namespace, pages: int) -> dict[str, Any]:
    fleet = FleetSettings(broker_url=url)
    queue = topology.results_queue(fleet, SERVICE)
    bodies = reply_bodies(pages)
    size = len(bodies[0])
    messages = max(1, min(args.messages, int(args.max_mb * 1e6 / size)))
    chunk = max(1, min(messages, int(args.chunk_mb * 1e6 / size)))
    makers: dict[str, Callable[[], Any]] = {
        "kombu": lambda: KombuConsumer(url, queue, args.prefetch),
        "pika": lambda: PikaConsumer(url, queue, args.prefetch),
        "pika-256k": lambda: PikaConsumer(url, queue, args.prefetch),
        **session_consumers(url, args.prefetch, service=SERVICE),
    }
    loader = pika.BlockingConnection(pika.URLParameters(url))
    lch = loader.channel()
    queue(connection(url).channel()).declare()
    lch.exchange_declare(fleet.results_exchange, "direct", durable=True)
    tallies = {name: Tally() for name in makers}
    rounds = max(1, messages // chunk)
    props = pika.BasicProperties(content_type="application/json", content_encoding="utf-8", delivery_mode=1)
    for r in range(rounds):
        for name, make in makers.items():  # one consumer at a time; alternate every chunk
            # Connected first (to an empty queue), loaded after: every delivery is read inside the timed
            # pumps (a consumer started on a full queue receives during its own set-up).
            with pika_reads(read_size(name)):
                consumer = make()
            for i in range(chunk):
                lch.basic_publish(fleet.results_exchange, SERVICE, bodies[(r + i) % len(bodies)], props)
            lch.queue_declare(queue.name, passive=True)  # a barrier: the broker has routed them all
            with pika_reads(read_size(name)):
                got, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
                while got < chunk:
                    consumer.pump(0.05)
                    got += consumer.take()
                tallies[name].add(got, time.process_time() - cpu0, time.perf_counter() - wall0)
                consumer.close()
    loader.close()
    out = _figures(tallies, base="kombu", per=pages, unit="pages")
    out["reply_bytes"] = size
    return out


# --- publishers ---------------------------------------------------------------------------------------
def celery_send(
    celery_app: Any, producer: Producer, batch: Batch, *, node: str, incarnation: str | None,
    scope_json: dict[str, Any] | None, expires_s: float | None = None, sink_json: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    """The publishing baseline: ``batch`` to ``fetch.<node>`` through Celery's ``send_task``, as the
    dispatcher published before ``batchsend`` built the same message itself (raises on a broker error)."""
    celery_app.send_task(
        topology.TASK_NAME,
        args=[batch.to_json()],
        kwargs={"incarnation": incarnation, "scope": scope_json, **({"sink": sink_json} if sink_json else {})},
        queue=topology.fetch_queue(node),
        producer=producer,
        task_id=f"{batch.service}-{batch.serial}",
        expires=expires_s if expires_s and expires_s > 0 else None,
        retry=False,
        ignore_result=True,
    )


def bench_publish(url: str, args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.settings import Settings
    from pipeline.transport.node.celery_app import make_app

    fleet = FleetSettings(broker_url=url)
    app = make_app(Settings(fleet=fleet))
    scope_json = {"domains": [f"site{i}.test" for i in range(40)], "allow": [], "deny": [r"/slow$", r"/big$"]}
    sink_json = {
        "store": "hbase://127.0.0.1:9090/crawl",
        "segments": "/srv/crawl/segments",
        "warc": "",
        "keep_body": False,
    }
    queue = topology.fetch_queue(NODE)
    kconn = connection(url, confirm=True)
    kconn.connect()
    queue(kconn.channel()).declare()
    producer = Producer(kconn.channel())
    pconn = pika.BlockingConnection(pika.URLParameters(url))
    pch = pconn.channel()
    pch.confirm_delivery()
    encoder = BatchEncoder(scope_json=scope_json, sink_json=sink_json)
    sample = batches(args.urls)
    from pipeline.transport.wire.pika_session import PikaSession

    session = PikaSession(fleet, service=SERVICE, heartbeat_ttl_s=10.0, stall_s=1e9, probe_after_s=1e9)
    assert session.connect()

    def encode(b: Batch) -> Any:
        return encoder.encode(b, node=NODE, incarnation="inc-1", expires_s=60.0)

    def celery(chunk: list[Batch]) -> None:
        for b in chunk:
            celery_send(app, producer, b, node=NODE, incarnation="inc-1", scope_json=scope_json, expires_s=60.0,
                        sink_json=sink_json)  # fmt: skip

    def kombu(chunk: list[Batch]) -> None:
        for b in chunk:
            publish_kombu(producer, encode(b))

    def pika_(chunk: list[Batch]) -> None:
        for b in chunk:
            publish_pika(pch, encode(b))

    def session_pika(chunk: list[Batch]) -> None:
        # The dispatcher's loop: a turn issues a few batches, then pumps; confirms come in later pumps.
        for i, b in enumerate(chunk):
            session.publish_task(encode(b), serial=b.serial)
            if i % args.burst == args.burst - 1:
                session.pump(0)
        while session.awaiting_confirms:  # every one confirmed inside the timed window
            session.pump(0.05)
        assert not session.take_unconfirmed()

    variants: dict[str, Callable[[list[Batch]], None]] = {
        "celery": celery,
        "kombu": kombu,
        "pika": pika_,
        "session-pika": session_pika,
    }
    tallies = {name: Tally() for name in variants}
    per = 250
    for r in range(max(1, args.batches // per)):
        chunk = [sample[(r + i) % len(sample)] for i in range(per)]
        for name, send in variants.items():
            cpu0, wall0 = time.process_time(), time.perf_counter()
            send(chunk)
            tallies[name].add(per, time.process_time() - cpu0, time.perf_counter() - wall0)
            pch.queue_purge(queue.name)  # untimed: keep the broker's memory and disk small
    session.close()
    size = len(encoder.encode(sample[0], node=NODE, incarnation="inc-1", expires_s=60.0).body)
    kconn.release()
    pconn.close()
    out = _figures(tallies, base="celery", per=args.urls, unit="urls")
    out["message_bytes"] = size
    out["ratio_to_kombu"] = {n: round(t.rate() / tallies["kombu"].rate(), 3) for n, t in tallies.items()}
    return out


def _figures(tallies: dict[str, Tally], *, base: str, per: int, unit: str) -> dict[str, Any]:
    ref = tallies[base].rate()
    return {"baseline": base, "clients": {name: {
        "messages": t.messages, "cpu_s": round(t.cpu_s, 3), "wall_s": round(t.wall_s, 3),
        "messages_per_cpu_s": round(t.rate()), f"{unit}_per_cpu_s": round(t.rate() * per),
        "us_cpu_per_message": round(1e6 / t.rate(), 1) if t.rate() else None,
        "ratio_to_" + base: round(t.rate() / ref, 3) if ref else None,
    } for name, t in tallies.items()}}  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    out: dict[str, Any] = {
        "machine": {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
                    "load_avg_start": os.getloadavg()[0]},
        "params": {k: v for k, v in vars(args).items() if k not in ("json", "func", "bench")},
    }  # fmt: skip
    with private_vhost(args.broker) as url:
        if args.only in (None, "consume"):
            out["consume"] = {f"pages_{n}": bench_consume(url, args, int(n)) for n in args.pages.split(",")}
        if args.only in (None, "publish"):
            out["publish"] = bench_publish(url, args)
    out["machine"]["load_avg_end"] = os.getloadavg()[0]
    return out
