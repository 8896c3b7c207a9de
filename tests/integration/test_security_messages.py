"""Messages are validated before use, JSON only: hostile messages injected into a live fleet (real
RabbitMQ, a real Celery worker, the real dispatcher) go to ``crawlfleet.dead`` and the crawl finishes
with its ground truth; a pickle is never unpickled; junk submits are dropped. Message shapes that once
took a process down are plain regression tests now.
"""

from __future__ import annotations

import json
import pickle
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Producer, Queue

from pipeline.harness.faults.bed import Bed
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.procs import wait_until
from pipeline.harness.faults.services import broker_vhost
from pipeline.harness.faults.snapshot import stored_urls
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import FleetSettings
from pipeline.transport.wire import topology

pytestmark = pytest.mark.integration

TASK = topology.TASK_NAME


class Marker:
    """Unpickling this creates ``path``: proof that a pickle was executed."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with broker_vhost() as url:
        yield url


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    tb = TestbedProcess(4, 8, seed=2, workdir=tmp_path_factory.mktemp("tb-msg")).start()
    try:
        yield Bed(tb)
    finally:
        tb.close()


def publish(url: str, queue: Queue, body: bytes, *, content_type: str, headers: dict[str, Any] | None = None,
            encoding: str = "utf-8") -> None:  # fmt: skip
    with Connection(url, connect_timeout=5) as conn:
        producer = Producer(conn.channel())
        producer.publish(body, exchange="", routing_key=queue.name, declare=[queue], content_type=content_type,
                         content_encoding=encoding, headers=headers or {}, delivery_mode=2, retry=True)  # fmt: skip


def task_headers() -> dict[str, Any]:
    tid = uuid.uuid4().hex
    return {"lang": "py", "task": TASK, "id": tid, "root_id": tid, "parent_id": None, "group": None, "retries": 0}


def task_body(batch: Any) -> bytes:
    return json.dumps([[batch], {"incarnation": None, "scope": None}, {}]).encode()


def dead_count(url: str) -> int:
    with Connection(url, connect_timeout=5) as conn:
        ch = conn.channel()
        _, count, _ = ch.queue_declare(queue=topology.DEAD_QUEUE, passive=True)
        return int(count)


def crawl(bed: Bed, vhost: str, tmp: Path, inject: Callable[[FleetRig], None]) -> tuple[FleetRig, dict[str, Any] | None, int]:
    """Run a one-worker fleet crawl, calling ``inject`` once the worker is registered."""
    rig = FleetRig(bed, vhost, tmp)
    summary = None
    try:
        rig.start_worker(1)
        rig.start_dispatcher()
        rig.nodes_up(1)
        inject(rig)
        code = rig.dispatcher.wait(180)
        if code == 0:
            summary = rig.wait_dispatcher()
    finally:
        rig.close()
    return rig, summary, code


def test_bad_task_messages_are_dead_lettered_and_never_run(bed: Bed, vhost: str, tmp_path: Path) -> None:
    marker = tmp_path / "pickle-ran"
    before = dead_count(vhost) if _dead_exists(vhost) else 0

    def inject(rig: FleetRig) -> None:
        q = topology.fetch_queue(rig.node(1))
        publish(vhost, q, pickle.dumps(Marker(str(marker))), content_type="application/x-python-serialize",
                headers=task_headers(), encoding="binary")  # fmt: skip
        publish(vhost, q, b"{not json", content_type="application/json", headers=task_headers())
        publish(vhost, q, task_body({"serial": "x"}), content_type="application/json", headers=task_headers())
        publish(vhost, q, task_body({}), content_type="application/json", headers=dict(task_headers(), task="os.system"))

    rig, summary, code = crawl(bed, vhost, tmp_path, inject)
    assert code == 0 and summary is not None, rig.dispatcher.log_tail()
    assert not marker.exists(), "a pickle from the network was executed"
    assert dead_count(vhost) - before >= 4
    missing = [u for u in bed.truth["pages"] if u not in stored_urls(rig.out)]
    assert not missing, missing[:5]


def _dead_exists(url: str) -> bool:
    try:
        dead_count(url)
        return True
    except Exception:
        return False


def test_bad_results_messages_are_dead_lettered(bed: Bed, vhost: str, tmp_path: Path) -> None:
    import zlib

    def inject(rig: FleetRig) -> None:
        q = topology.results_queue(FleetSettings(), rig.service)
        publish(vhost, q, b"\x80\x04not json", content_type="application/json")
        publish(vhost, q, b'{"v": 1, "kind": "results"}', content_type="application/json")
        publish(vhost, q, b'{"v": 1, "kind": "submit", "service": 3}', content_type="application/json")
        publish(vhost, q, b'{"v": 1}', content_type="application/x-python-serialize", encoding="binary")
        publish(vhost, q, zlib.compress(b"[" * (80 << 20)), content_type="application/json", encoding="deflate")

    rig, summary, code = crawl(bed, vhost, tmp_path, inject)
    assert code == 0 and summary is not None, rig.dispatcher.log_tail()
    assert summary["fleet"]["dead_lettered"] >= 5, summary["fleet"]
    missing = [u for u in bed.truth["pages"] if u not in stored_urls(rig.out)]
    assert not missing, missing[:5]


SURROGATE_BATCH = (
    "A fetch task whose URL host holds a lone surrogate (\\ud800, valid JSON) kills the Celery worker with "
    "SIGSEGV: check_task_message/Batch.from_json accept any string, the engine resolves the host, and "
    "pipeline.dns.keys.name_key hashes it with mmh3, which dereferences NULL on a non-UTF-8-encodable str "
    "(tests/unit/test_fuzz_dns_keys.py). acks_late + reject_on_worker_lost put the message back: the next "
    "worker dies too. Fix: validate task URLs in Batch.from_json (normalize(url) == url) and hash bytes in "
    "name_key/fingerprint."
)


def test_dispatcher_survives_an_infinite_report(bed: Bed, vhost: str, tmp_path: Path) -> None:
    """Was a crash (found by this suite, fixed in 6a176b8): now a dead-lettered message."""
    def inject(rig: FleetRig) -> None:
        body = (b'{"v":1,"kind":"results","node":"n","incarnation":"i","results":[],'
                b'"reports":[{"v":1,"serial":999999,"fetcher_id":"x","pages":1e999,"elapsed_s":0}]}')  # fmt: skip
        publish(vhost, topology.results_queue(FleetSettings(), rig.service), body, content_type="application/json")

    rig, summary, code = crawl(bed, vhost, tmp_path, inject)
    assert code == 0 and summary is not None, rig.dispatcher.log_tail()


def test_dispatcher_survives_a_junk_submit(bed: Bed, vhost: str, tmp_path: Path) -> None:
    """Submitted URLs that normalize() rejects are dropped (CrawlCore.add_seeds), the crawl goes on."""

    def inject(rig: FleetRig) -> None:
        # (a live but unreachable in-scope URL would keep the crawl open: robots.txt unreachable = retry later)
        urls = ["not a url", "javascript:alert(1)", "http://\u00e9.crawl.test:1/\x00", "ftp://site0.crawl.test/", ""]
        body = json.dumps({"v": 1, "kind": "submit", "service": rig.service, "urls": urls}).encode()
        publish(vhost, topology.submit_queue(rig.service), body, content_type="application/json")

    rig, summary, code = crawl(bed, vhost, tmp_path, inject)
    assert code == 0 and summary is not None, rig.dispatcher.log_tail()


def test_worker_survives_a_surrogate_url(bed: Bed, vhost: str, tmp_path: Path) -> None:
    """Was SURROGATE_BATCH; fixed: Batch.from_json rejects non-UTF-8 URLs, keys and fingerprints hash bytes."""
    rig = FleetRig(bed, vhost, tmp_path)
    try:
        worker = rig.start_worker(1)
        # Wait until the worker consumes its queue (its Celery banner says so), then send the batch.
        wait_until(lambda: b"ready." in rig.workers[rig.node(1)].log_path.read_bytes(), timeout_s=60, what="worker ready")
        batch = {"v": 1, "serial": 1, "fetcher_id": f"{rig.node(1)}#0", "service": rig.service, "issued_at": time.time(),
                 "tasks": [[f"http://\ud800.crawl.test:{bed.tb.port}/", 1, 0]]}  # fmt: skip
        publish(vhost, topology.fetch_queue(rig.node(1)), task_body(batch), content_type="application/json",
                headers=task_headers())  # fmt: skip
        time.sleep(10.0)
        alive = worker.running
        code = worker.proc.returncode if worker.proc is not None else None
    finally:
        rig.close()
    assert alive, f"worker died with {code}"
