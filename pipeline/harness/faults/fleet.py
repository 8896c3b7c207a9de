"""A fleet of real processes for one fault trial: Celery fetch workers and the fleet dispatcher.

Built only on the public entry points (``crawlfleet worker``, ``crawlfleet dispatcher``) and the
``CRAWLFLEET_*`` environment. A rig is used for one crawl: fetch workers remember finished serial ids
and serials restart at 1 in every fresh crawl, so workers are never shared between crawls. The lease
is shortened (15 s instead of 120 s) so that a batch stuck on a wedged node costs a trial 15 s. Every
fetching process names its pid in its User-Agent (``fetch.identify_process``): the judge
(pipeline.harness.faults.accounting) tells a struck process's requests apart by it.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.harness.faults.bed import FAST_S, Bed
from pipeline.harness.faults.procs import HarnessError, Managed, python_cmd, wait_until
from pipeline.settings import StoreSettings


class FleetRig:
    """Workers ``<prefix>-<i>`` and one dispatcher crawling ``bed`` through ``broker_url``."""

    def __init__(
        self,
        bed: Bed,
        broker_url: str,
        workdir: Path,
        *,
        heartbeat_s: float = 0.5,
        lease_s: float = 15.0,
        host_delay: float = FAST_S,
        slots: int = 4,
        dns_server: str | None = None,
        store: StoreSettings | None = None,
        extra_env: dict[str, str] | None = None,
        log_level: str = "INFO",
        links_runner: str = "inline",
    ) -> None:
        self.bed = bed
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.out = workdir / "out"
        self.slots = slots
        self.links_runner = links_runner  # the mrjob runner of `crawlfleet links`
        self.log_level = log_level
        self.service = f"svc{uuid.uuid4().hex[:8]}"
        self.prefix = f"n{uuid.uuid4().hex[:6]}"
        self.store = store or StoreSettings()
        env = dict(
            os.environ, CRAWLFLEET_BROKER_URL=broker_url,
            CRAWLFLEET_DNS_SERVERS=dns_server or f"127.0.0.1:{bed.tb.dns_port}",
            CRAWLFLEET_SECURITY_ALLOW_NETWORKS="127.0.10.0/24",
            CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S=str(host_delay), CRAWLFLEET_DISPATCH_HEARTBEAT_S=str(heartbeat_s),
            CRAWLFLEET_DISPATCH_LEASE_S=str(lease_s),
            CRAWLFLEET_SCOPE_MAX_DEPTH=str(bed.max_depth), CRAWLFLEET_DISPATCH_SERVICE=self.service,
            CRAWLFLEET_STORE_KIND=self.store.kind, CRAWLFLEET_STORE_HBASE_HOST=self.store.hbase_host,
            CRAWLFLEET_STORE_HBASE_PORT=str(self.store.hbase_port),
            CRAWLFLEET_STORE_HBASE_PREFIX=self.store.hbase_prefix, PYTHONUNBUFFERED="1",
            # merged segments stay under .done/ (the default deletes them): harness reads read them
            CRAWLFLEET_FLEET_SEGMENT_RETENTION_S="-1",
            CRAWLFLEET_FETCH_IDENTIFY_PROCESS="true",  # the judge tells the fetching processes apart by it
        )  # fmt: skip
        env.update(extra_env or {})
        self.env = env
        self.workers: dict[str, Managed] = {}
        self.dispatcher = Managed("dispatcher", [], env, workdir / "dispatcher.log",
                                  stdout_path=workdir / "dispatcher.out")  # fmt: skip
        self.links = Managed("links", [], env, workdir / "links.log")

    def new_crawl(self, name: str) -> None:
        """Point the next ``start_dispatcher`` at a fresh crawl (service, directory); workers stay."""
        self.service = f"svc{uuid.uuid4().hex[:8]}"
        self.out = self.workdir / name
        self.env = dict(self.env, CRAWLFLEET_DISPATCH_SERVICE=self.service)
        self.dispatcher = Managed(f"dispatcher {name}", [], self.env, self.workdir / f"dispatcher-{name}.log",
                                  stdout_path=self.workdir / f"dispatcher-{name}.out")  # fmt: skip
        self.links.terminate(timeout_s=15)
        self.links = Managed(f"links {name}", [], self.env, self.workdir / f"links-{name}.log")

    # --- processes ---------------------------------------------------------------------------------
    def node(self, i: int) -> str:
        return f"{self.prefix}-{i}"

    def start_worker(self, i: int) -> Managed:
        name = self.node(i)
        w = self.workers.get(name)
        if w is None:
            cmd = python_cmd("worker", "--node", name, "--slots", str(self.slots), "--loglevel", self.log_level)
            w = self.workers[name] = Managed(f"worker {name}", cmd, self.env, self.workdir / f"worker-{name}.log")
        return w.start()

    def start_dispatcher(self, *, resume: bool = False) -> Managed:
        seeds = [] if resume else list(self.bed.tb.seeds)
        cmd = python_cmd("dispatcher", *seeds, "--out", str(self.out), "--json", "--no-progress",
                         "--log-level", self.log_level, *(["--resume"] if resume else []))  # fmt: skip
        if not self.links.running:  # the link jobs are on the crawl's path: it needs them running
            self.start_links()
        return self.dispatcher.start(cmd)

    def start_links(self) -> Managed:
        """The link jobs (``links_runner``) over this crawl's node segments; restartable after a kill."""
        cmd = python_cmd("links", "--out", str(self.out), "--runner", self.links_runner, "--log-level", self.log_level,
                         "--work-dir", str(self.workdir / "jobs-work"))  # fmt: skip
        return self.links.start(cmd)

    def wait_dispatcher(self, *, timeout_s: float = 240.0) -> dict[str, Any]:
        try:
            code = self.dispatcher.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"the crawl did not end within {timeout_s:.0f} s:\n{self.logs_tail()}") from None
        if code != 0:
            raise HarnessError(f"dispatcher exited with {code}:\n{self.dispatcher.log_tail()}")
        assert self.dispatcher.stdout_path is not None
        lines = [ln for ln in self.dispatcher.stdout_path.read_text().splitlines() if ln.startswith("{")]
        if not lines:
            raise HarnessError(f"dispatcher printed no summary:\n{self.dispatcher.log_tail()}")
        return dict(json.loads(lines[-1]))

    def logs_tail(self, n: int = 4000) -> str:
        """The end of every process's log, the dispatcher's first: what a hung crawl's verdict shows."""
        procs = [self.dispatcher, self.links, *self.workers.values()]
        return "\n".join(f"--- {p.name}:\n{p.log_tail(n)}" for p in procs)

    def close(self) -> None:
        self.dispatcher.terminate(timeout_s=15)
        self.links.terminate(timeout_s=15)
        for w in self.workers.values():
            w.terminate(timeout_s=15)

    # --- what the dispatcher says -----------------------------------------------------------------
    def events(self) -> list[dict[str, Any]]:
        path = self.out / "fleet-events.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            if line.endswith("}"):
                out.append(json.loads(line))
        return out

    def wait_event(self, pred: Callable[[dict[str, Any]], bool], *, timeout_s: float = 60.0) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def seen() -> bool:
            if not self.dispatcher.running:
                raise HarnessError(f"dispatcher exited:\n{self.dispatcher.log_tail()}")
            found[:] = [ev for ev in self.events() if pred(ev)][:1]
            return bool(found)

        wait_until(seen, timeout_s=timeout_s, every_s=0.1, what="a fleet event")
        return found[0]

    def nodes_up(self, n: int, *, timeout_s: float = 90.0) -> None:
        """Wait until the dispatcher has registered ``n`` nodes (workers take seconds to start)."""
        def up() -> bool:
            if not self.dispatcher.running:
                raise HarnessError(f"dispatcher exited:\n{self.dispatcher.log_tail()}")
            return len({ev["node"] for ev in self.events() if ev["ev"] == "node_up"}) >= n

        wait_until(up, timeout_s=timeout_s, every_s=0.2, what=f"{n} fetch nodes to register")

    def held_by(self, node: str) -> list[int]:
        """Serials issued to ``node`` and neither done nor expired yet."""
        events = self.events()
        issued = {ev["serial"] for ev in events if ev["ev"] == "issue" and ev["node"] == node}
        closed = {ev["serial"] for ev in events if ev["ev"] in ("done", "expired")}
        return sorted(issued - closed)

    def first_event_after(self, t: float, pred: Callable[[dict[str, Any]], bool]) -> float | None:
        """Time of the first event at or after ``t`` matching ``pred`` (None if there is none)."""
        times = [float(ev["t"]) for ev in self.events() if float(ev["t"]) >= t and pred(ev)]
        return min(times) if times else None
