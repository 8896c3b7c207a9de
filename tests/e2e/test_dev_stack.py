"""The dev stack as a new user starts it: the real ``honcho start`` with the project's Procfile.

With RabbitMQ, HBase, unbound and the cluster services (S3, HDFS + YARN, Spark) already running (as
after ``make services``, or started by the fixtures), the Procfile's service entries must attach to them, every crawlfleet process must wait for
what it needs, a ``crawlfleet submit`` must get the testbed crawled exactly once per reachable page
(judged from the testbed's access log and the HBase store, never the crawler's word), and a SIGINT to
honcho (Ctrl-C) must stop every process it started while leaving the shared services running.

The Procfile honcho runs is generated from the project's one, with only these changes (each asserted,
so a Procfile change that defeats one fails here rather than testing something else):

- the testbed serves 3 pages per host instead of 100 and writes an access log and a ready file.
  The host count stays the Procfile's: the testbed maps a host to an address by the number of hosts,
  and the shared unbound caches answers for at least 300 s, so another host count would make it hand
  out addresses of another web;
- ``var/`` paths go to a temporary directory.

The environment (honcho ``-e``) puts the broker on this session's private vhost and the crawl's HBase
tables (dispatcher, nodes, link jobs) under a table prefix of this test, dropped at the end. Ports:
the Procfile's testbed uses 8080 (on 127.0.10.x) with DNS on 5353, and the dispatcher's metrics
9100; no other test uses them, and the test fails at once, saying so, when something else holds them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.hbase import drop_prefix
from tests.fixtures.rabbitmq import check_truth

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
HONCHO = Path(sys.executable).parent / "honcho"
PAGES = 3  # per host (the Procfile serves 100)
MAX_DEPTH = 20  # the dispatcher's default (the Procfile gives it no --max-depth)
NODES = ("edge1", "edge2")
# Each process's own port the stack needs free (the services on 5672, 9090 and 5335 are shared).
OWN_PORTS = {("127.0.10.1", 8080): "the testbed's HTTP", ("127.0.0.1", 5353): "the testbed's DNS",
             ("127.0.0.1", 9100): "the dispatcher's metrics",
             ("127.0.0.1", 5336): "the shared DNS server (crawlfleet dns serve)"}  # fmt: skip
_STARTED = re.compile(r"\bsystem\s*\| (\S+) started \(pid=(\d+)\)")
_STOPPED = re.compile(r"\bsystem\s*\| (\S+) stopped \(rc=(-?\d+)\)")


# The Procfile entries that attach to a service of `make services` (and detach from it at Ctrl-C).
SHARED = ("rabbitmq", "hbase", "unbound", "s3", "hadoop", "spark")


# --- the Procfile honcho runs ------------------------------------------------------------------------
def stack_procfile(var: Path, tb_dir: Path) -> str:
    """The project's Procfile with the substitutions described in the module docstring."""
    out = []
    for line in (ROOT / "Procfile").read_text().splitlines():
        name = line.partition(":")[0].strip()
        if name == "testbed":
            line, n = re.subn(r"--pages \d+", f"--pages {PAGES}", line)
            assert n == 1, line
            line += f" --access-log {tb_dir / 'access.jsonl'} --ready-file {tb_dir / 'ready.json'}"
        line = re.sub(r"(?<=\s)var/", f"{var}/", line)
        out.append(line)
    text = "\n".join(out) + "\n"
    assert " var/" not in text, "a var/ path left in the repository"
    return text


# --- honcho as a subprocess, its output collected ------------------------------------------------------
@dataclass
class Stack:
    proc: subprocess.Popen[str]
    log_path: Path
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def start_reader(self) -> None:
        def read() -> None:
            assert self.proc.stdout is not None
            with open(self.log_path, "a") as log:
                for line in self.proc.stdout:
                    self.lines.append(line.rstrip("\n"))
                    log.write(line)
                    log.flush()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()

    def text(self) -> str:
        return "\n".join(self.lines)

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.lines[-n:])

    def of(self, name: str) -> list[str]:
        """Output lines of the Procfile entry ``name`` (honcho names it ``name.1``)."""
        return [ln.split("| ", 1)[1] for ln in self.lines if re.search(rf"\s{re.escape(name)}\.1\s*\|", ln)]

    def started(self) -> dict[str, int]:
        return {m[1]: int(m[2]) for m in _STARTED.finditer(self.text())}

    def stopped(self) -> dict[str, int]:
        return {m[1]: int(m[2]) for m in _STOPPED.finditer(self.text())}

    def wait_for(self, what: str, pred: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not pred():
            if self.proc.poll() is not None:
                time.sleep(0.5)  # let the reader catch the last lines
                raise AssertionError(f"honcho exited ({self.proc.returncode}) before {what}:\n{self.tail(80)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout_s:.0f}s:\n{self.tail(80)}")
            time.sleep(0.5)

    def join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(10)


def group_members(pgids: set[int]) -> list[str]:
    """``pid command`` of every live process in one of ``pgids`` (each honcho entry is its own group)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pgid = int(stat.rsplit(")", 1)[1].split()[2])
            state = stat.rsplit(")", 1)[1].split()[0]
            if pgid in pgids and state != "Z":
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{entry.name} {cmdline[:160]}")
        except (OSError, IndexError, ValueError):
            continue
    return out


def port_taken(host: str, port: int) -> bool:
    """Something else listens there (a server's bind ignores the TIME-WAIT left by a previous run)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM) if port == 5353 else (socket.SOCK_STREAM,):
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return True
    return False


def resolve(name: str, port: int = 5335) -> str | None:
    """The A record ``name`` has at the resolver on 127.0.0.1:``port`` (None: no answer)."""
    from dnslib import QTYPE, DNSRecord

    try:
        reply = DNSRecord.parse(DNSRecord.question(name, "A").send("127.0.0.1", port, timeout=3))
    except OSError:
        return None
    return next((str(rr.rdata) for rr in reply.rr if rr.rtype == QTYPE.A), None)


@pytest.fixture
def dev_stack_prefix(hbase_thrift: tuple[str, int]) -> Iterator[str]:
    """A table prefix for this test's crawl store in the shared HBase; its tables are dropped after."""
    prefix = f"devstack{uuid.uuid4().hex[:8]}"
    yield prefix
    drop_prefix(prefix)


@pytest.fixture
def shared_unbound() -> None:
    """The unbound of `make services` on 127.0.0.1:5335 (started if it is not running), for the Procfile's
    `unbound` entry to attach to, as RabbitMQ and HBase are by their fixtures."""
    proc = subprocess.run([str(ROOT / "scripts" / "svc-unbound.sh"), "start"], capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, f"scripts/svc-unbound.sh start failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("shared_unbound", "s3_server", "hdfs_yarn", "spark_standalone")
def test_honcho_start_crawls_the_testbed_once_and_stops_cleanly(
    rabbitmq: str, dev_stack_prefix: str, tmp_path: Path
) -> None:
    taken = [f"{what} ({h}:{p})" for (h, p), what in OWN_PORTS.items() if port_taken(h, p)]
    if taken:
        pytest.fail(f"ports of the Procfile are in use (a dev stack still running?): {', '.join(taken)}")
    var, tb_dir = tmp_path / "var", tmp_path / "testbed"
    tb_dir.mkdir()
    procfile = tmp_path / "Procfile"
    procfile.write_text(stack_procfile(var, tb_dir))
    env_file = tmp_path / "stack.env"
    env_file.write_text(f"CRAWLFLEET_BROKER_URL={rabbitmq}\nCRAWLFLEET_STORE_HBASE_PREFIX={dev_stack_prefix}\n"
                        "PYTHONUNBUFFERED=1\n")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    proc = subprocess.Popen([str(HONCHO), "--no-colour", "-f", str(procfile), "-e", str(env_file), "start"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    stack = Stack(proc, tmp_path / "honcho.log")
    stack.start_reader()
    names = [ln.partition(":")[0].strip() for ln in procfile.read_text().splitlines() if ln and not ln.startswith("#")]
    try:
        # 1. The stack comes up and stays up: services attached, testbed ready, every process past its wait.
        ready_file = tb_dir / "ready.json"
        stack.wait_for("testbed ready file", ready_file.exists, 120)
        for node in NODES:

            def worker_ready(n: str = node) -> bool:
                return any(f"{n}@" in ln and "ready." in ln for ln in stack.lines)

            stack.wait_for(f"celery worker {node} ready", worker_ready, 300)
        for name in ("dispatcher", "jobs"):

            def past_hbase_wait(n: str = name) -> bool:
                return any(ln.startswith("wait-for: hbase:127.0.0.1:9090 up") for ln in stack.of(n))

            stack.wait_for(f"{name} past its wait for HBase", past_hbase_wait, 300)
        for name in SHARED:

            def attached(n: str = name) -> bool:
                return any("attached, watching it" in ln for ln in stack.of(n))

            stack.wait_for(f"{name} attached to the running service", attached, 120)
        assert proc.poll() is None and not stack.stopped(), stack.tail()
        tb = TestbedProcess(50, PAGES, workdir=tb_dir)  # not started: a view of the stack's testbed
        tb.info = json.loads(ready_file.read_text())
        assert (tb.port, tb.dns_port, tb.hosts) == (8080, 5353, tb.info["hosts"]), tb.info
        answers = {h: resolve(h) for h in tb.info["host_ips"]}
        wrong = {h: (answers[h], ip) for h, ip in tb.info["host_ips"].items() if answers[h] != ip}
        assert not wrong, (f"unbound on 5335 answers other addresses than the testbed's (cached from another "
                           f"web? restart it: scripts/svc-unbound.sh stop; scripts/svc-unbound.sh start): {wrong}")  # fmt: skip

        # 2. Seed it as a user would; the dispatcher says when the crawl is done.
        submit = subprocess.run([str(Path(sys.executable).parent / "crawlfleet"), "submit", "--service", "default",
                                 *tb.seeds], cwd=ROOT, env={**env, "CRAWLFLEET_BROKER_URL": rabbitmq},
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert submit.returncode == 0, submit.stderr
        events_path = var / "fleet" / "fleet-events.jsonl"

        def events() -> list[dict[str, Any]]:
            if not events_path.exists():
                return []
            return [json.loads(ln) for ln in events_path.read_text().splitlines() if ln.endswith("}")]

        stack.wait_for("crawl_done event", lambda: any(ev["ev"] == "crawl_done" for ev in events()), 480)
        ups = {ev["node"] for ev in events() if ev["ev"] == "node_up"}
        assert ups == set(NODES), ups
        assert proc.poll() is None and not stack.stopped(), stack.tail()

        # 3. Ctrl-C: honcho stops every process; none needs SIGKILL; the shared services keep running.
        started = stack.started()
        assert set(started) == {f"{n}.1" for n in names}, started
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        stack.join_reader()
        assert proc.returncode == 130, stack.tail()  # honcho's code for a SIGINT stop
        assert set(stack.stopped()) == set(started), stack.tail()
        assert "SIGKILL" not in stack.text(), stack.tail()
        time.sleep(1.0)
        assert group_members(set(started.values())) == []
        for name in SHARED:
            assert any("detached" in ln for ln in stack.of(name)), (name, stack.of(name))
        # honcho reports each entry's shell, killed by the same SIGTERM (rc -15); the dispatcher's own stop
        # path shows in its summary lines and summary.json.
        assert any(ln.startswith("pages_fetched") for ln in stack.of("dispatcher")), stack.of("dispatcher")
        summary = json.loads((var / "fleet" / "summary.json").read_text())
        assert summary["fleet"]["interrupted"] is False and summary["store"]["pending"] == 0, summary

        # 4. The crawl, judged from the testbed's access log (flushed at its exit) and the store.
        truth = tb.truth(max_depth=MAX_DEPTH)
        check_truth(tb, truth, nodes=len(NODES))
        from pipeline.storage.hbase import HBaseStore

        store = HBaseStore("127.0.0.1", 9090, prefix=dev_stack_prefix)
        try:
            pages = list(store.iter_pages())
        finally:
            store.close()
        stored = [p.url for p in pages]
        assert len(stored) == len(set(stored)), "a page stored twice"
        reached = set(stored) | {p.final_url for p in pages}
        assert [u for u in truth["pages"] if u not in reached] == []
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        for pgid in stack.started().values():  # whatever honcho left behind (the assertions above said so)
            if group_members({pgid}):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
        stack.join_reader()
