"""A continuous fleet crawl as child processes, for the freshness bench: one fetch node (``crawlfleet
worker``), the link jobs (``crawlfleet links``, whose crawl-db update computes the re-crawl schedule,
``jobs/recrawl.py``) and the dispatcher (``crawlfleet dispatcher --continuous``), on RabbitMQ and a SQLite
crawl db, ended the way a user ends one: by the dispatcher's stop file. Used like ``ContinuousCrawl``.

May import: pipeline (bench room).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from pipeline.harness.bench.fleet import _wait_heartbeats


class FleetCrawl:
    """Starts ``nodes`` workers, the link jobs and the dispatcher on entry (all with ``config``);
    ``stop`` creates the stop file, waits for the dispatcher, then ends the others. Leaving the block any
    other way kills them all."""

    def __init__(
        self, seeds: Sequence[str], *, out: Path, config: Path, stop_file: Path, broker_url: str,
        dns_port: int, workdir: Path, nodes: int = 1,
    ) -> None:  # fmt: skip
        tag = uuid.uuid4().hex[:6]
        self.seeds, self.out, self.config, self.stop_file = list(seeds), out, config, stop_file
        self.workdir, self.broker_url = workdir, broker_url
        self.nodes = [f"fresh{tag}-{i}" for i in range(1, nodes + 1)]
        self.env = dict(
            os.environ, CRAWLFLEET_BROKER_URL=broker_url, CRAWLFLEET_DISPATCH_SERVICE=f"fresh{tag}",
            CRAWLFLEET_DNS_SERVERS=f"127.0.0.1:{dns_port}", CRAWLFLEET_SECURITY_ALLOW_NETWORKS="127.0.10.0/24",
            PYTHONUNBUFFERED="1",
        )  # fmt: skip
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dispatcher: subprocess.Popen[str] | None = None

    def _cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pipeline.cli", *args]

    def __enter__(self) -> FleetCrawl:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.stop_file.unlink(missing_ok=True)
        for node in self.nodes:
            log = open(self.workdir / f"worker-{node}.log", "wb")  # noqa: SIM115 - owned by the process
            cmd = self._cli("worker", "--node", node, "--config", str(self.config), "--loglevel", "WARNING")
            self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT))
        _wait_heartbeats(self.broker_url, set(self.nodes), timeout_s=120)
        log = open(self.workdir / "links.log", "wb")  # noqa: SIM115 - owned by the process
        cmd = self._cli("links", "--out", str(self.out), "--config", str(self.config), "--runner", "inline",
                        "--work-dir", str(self.workdir / "jobs-work"), "--log-level", "WARNING")  # fmt: skip
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT))
        err = open(self.workdir / "dispatcher.log", "w")  # noqa: SIM115 - owned by the process
        cmd = self._cli("dispatcher", *self.seeds, "--out", str(self.out), "--config", str(self.config), "--json",
                        "--no-progress", "--continuous", "--stop-file", str(self.stop_file))  # fmt: skip
        self.dispatcher = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=err, text=True)
        return self

    def running(self) -> bool:
        return self.dispatcher is not None and self.dispatcher.poll() is None

    def stderr_tail(self, n: int = 3000) -> str:
        path = self.workdir / "dispatcher.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else ""

    def stop(self, *, timeout_s: float = 120.0) -> tuple[int, str, str]:
        """Create the stop file, wait for the dispatcher, end the link jobs and the nodes: (exit code,
        the dispatcher's stdout, its log's tail)."""
        assert self.dispatcher is not None, "not started"
        self.stop_file.write_text("")
        stdout, _ = self.dispatcher.communicate(timeout=timeout_s)
        self._end_others()
        return self.dispatcher.returncode, stdout, self.stderr_tail()

    def _end_others(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.dispatcher is not None and self.dispatcher.poll() is None:
            self.dispatcher.kill()
            self.dispatcher.communicate()
        self._end_others()
