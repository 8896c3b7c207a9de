"""The fleet dispatcher serves Prometheus /metrics and an HTML /status page (#9), on a real RabbitMQ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.rabbitmq import free_port

pytestmark = pytest.mark.integration


def test_dispatcher_serves_metrics_and_status(rabbitmq: str, tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, CRAWLFLEET_BROKER_URL=rabbitmq)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "dispatcher", "http://site0.crawl.test:1/",
         "--service", f"metrics{port}", "--out", str(tmp_path / "out"), "--serve", "--metrics-port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        # The dispatcher has one seed and no fetch node: once its first snapshot is out, the figures say so.
        deadline = time.time() + 60
        values: dict[str, float] = {}
        while time.time() < deadline and "crawlfleet_batches_in_flight" not in values:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                values = {s.name: s.value for fam in text_string_to_metric_families(body) for s in fam.samples
                          if not s.labels}  # fmt: skip
            except OSError:
                pass
            time.sleep(0.3)
        assert values, proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "no /metrics"
        assert values["crawlfleet_queue_urls"] == 1, values
        assert values["crawlfleet_batches_in_flight"] == 0, values
        status = urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5).read().decode()
        assert "<html" in status.lower() and "Fetchers (0)" in status, status[:2000]
        snap = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5).read())
        assert snap["batches_in_flight"] == 0, snap
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
