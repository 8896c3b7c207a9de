"""Start and stop a testbed as a subprocess (tests, benchmarks, demo).

    with TestbedProcess(hosts=20, pages=50) as tb:
        tb.seeds, tb.port, tb.dns_port, tb.truth(), tb.read_access_log()

``TestbedProcess(..., tls=True, plain_http="serve"|"redirect"|"disallow")`` also serves the https web with the
testbed's own CA: ``tb.tls_port``, ``tb.ca_file`` (trust it in the crawler only: ``fetch.tls_ca_bundle``),
``tb.https_seeds``, ``tb.truth(scheme="https")``, ``tb.url(i, path, scheme="https")``.

``TestbedProcess(..., mutate=True, mutate_rate=R)`` serves the living web (``living.py``): pages change
over test time ``(wall - epoch) * R``; ``tb.living``, ``tb.test_time()``, ``tb.versions_at()`` give the
truth the server uses (its epoch comes from the ready file).

Ports are chosen by the server itself (``--port 0 --dns-port 0``) and read back from the ready
file, so there is no race on "free" ports. Stopping sends SIGTERM (the server flushes its access
log), then SIGKILL after ``stop_timeout_s``.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from pipeline.harness.testbed.accesslog import FLUSH_HOST
from pipeline.harness.testbed.living import CLASSIC, ROBOTS_CHANGE_HOST, Living
from pipeline.harness.testbed.model import Web

SENTINEL_HOST = "sentinel.invalid"  # ``mark``'s requests: logged (404), never part of a web


class TestbedError(RuntimeError):
    pass


class TestbedProcess:
    """A running ``testbed serve`` subprocess. Use as a context manager (or ``start``/``stop``)."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        hosts: int,
        pages: int,
        *,
        seed: int = 0,
        hostile: bool = False,
        dns_latency_ms: float = 0.0,
        workers: int = 1,
        engine: str = "fast",
        workdir: str | os.PathLike[str] | None = None,
        extra_args: tuple[str, ...] = (),
        start_timeout_s: float = 60.0,  # the server imports, builds its web and checks itself: slow under load
        stop_timeout_s: float = 10.0,
        mutate: bool = False,
        mutate_rate: float = 1.0,
        mutate_epoch: float | None = None,
        mutate_mix: str = CLASSIC,
        hostile_sitemaps: bool = True,
        robots_change_s: float | None = None,
        throttle_every: int = 0,
        lying_validators: bool = False,
        tls: bool = False,
        plain_http: str = "serve",
        products: bool = False,
    ) -> None:
        self.hosts, self.pages, self.seed = hosts, pages, seed
        self.hostile, self.dns_latency_ms, self.workers = hostile, dns_latency_ms, workers
        self.extra_args = extra_args
        self.mutate, self.mutate_rate, self.mutate_epoch = mutate, mutate_rate, mutate_epoch
        self.hostile_sitemaps = hostile_sitemaps
        self.products = products
        self.robots_change_s, self.throttle_every = robots_change_s, throttle_every
        self.lying_validators = lying_validators
        self.mutate_mix = mutate_mix
        self.engine = engine
        self.tls, self.plain_http = tls, plain_http
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="testbed-")
            workdir = self._tmp.name
        self.workdir = Path(workdir)
        self.access_log = self.workdir / "access.jsonl"
        self.ready_file = self.workdir / "ready.json"
        self.stderr_path = self.workdir / "testbed.stderr"
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}

    # --- lifecycle -----------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "pipeline.harness.testbed.cli", "serve",
            "--hosts", str(self.hosts), "--pages", str(self.pages), "--seed", str(self.seed),
            "--port", "0", "--dns-port", "0",
            "--access-log", str(self.access_log), "--ready-file", str(self.ready_file),
            "--workers", str(self.workers), "--dns-latency-ms", str(self.dns_latency_ms),
            "--engine", self.engine,
        ]  # fmt: skip
        if self.hostile:
            cmd.append("--hostile")
        if self.tls:
            cmd += ["--tls", "--tls-port", "0", "--tls-dir", str(self.workdir / "tls"), "--plain-http", self.plain_http]
        if self.products:
            cmd.append("--products")
        if self.mutate:
            cmd += ["--mutate", "--mutate-rate", repr(self.mutate_rate), "--mutate-mix", self.mutate_mix]
            if self.mutate_epoch is not None:
                cmd += ["--mutate-epoch", repr(self.mutate_epoch)]
            if not self.hostile_sitemaps:
                cmd.append("--no-hostile-sitemaps")
            if self.robots_change_s is not None:
                cmd += ["--robots-change-s", repr(self.robots_change_s)]
            if self.throttle_every:
                cmd += ["--throttle-every", str(self.throttle_every)]
            if self.lying_validators:
                cmd.append("--lying-validators")
        return cmd + list(self.extra_args)

    def start(self) -> TestbedProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                self.command(), stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
        deadline = time.monotonic() + self.start_timeout_s
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                raise TestbedError(f"testbed exited with {self.proc.returncode}: {self._stderr_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TestbedError(f"testbed not ready after {self.start_timeout_s}s: {self._stderr_tail()}")
            time.sleep(0.05)
        self.info = json.loads(self.ready_file.read_text())
        return self

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code (None if never started)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return proc.returncode

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> TestbedProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    # --- what tests need -----------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self.info["port"])

    @property
    def dns_port(self) -> int:
        return int(self.info["dns_port"])

    @property
    def dns_server(self) -> str:
        """``HOST:PORT`` of the DNS server, the form ``crawlfleet crawl --dns-server`` takes."""
        return f"{self.info['dns_host']}:{self.dns_port}"

    @property
    def hostile_port(self) -> int:
        """Port of hostile.crawl.test (only with ``hostile=True``)."""
        return int(self.info["hostile_port"])

    @property
    def hostile_seed(self) -> str:
        return str(self.info["hostile_seed"])

    def hostile_url(self, path: str) -> str:
        return f"http://hostile.crawl.test:{self.hostile_port}{path}"

    @property
    def seeds(self) -> list[str]:
        return list(self.info["seeds"])

    @property
    def ips(self) -> list[str]:
        return list(self.info["ips"])

    @property
    def web(self) -> Web:
        """The served web's model (with its ``living`` clock when started with ``mutate=True``)."""
        return Web(self.hosts, self.pages, seed=self.seed, port=self.port, living=self.living, products=self.products)

    def web_for(self, scheme: str) -> Web:
        """The web as served over ``scheme`` ("http" or, with ``tls=True``, "https" on the TLS port)."""
        if scheme == "http":
            return self.web
        return Web(self.hosts, self.pages, seed=self.seed, port=self.tls_port, living=self.living, scheme=scheme)

    @property
    def tls_port(self) -> int:
        """The HTTPS port (only with ``tls=True``)."""
        return int(self.info["tls"]["port"])

    @property
    def ca_file(self) -> str:
        """The testbed CA's certificate (PEM), to be trusted by the crawler under test only."""
        return str(self.info["tls"]["ca"])

    @property
    def https_seeds(self) -> list[str]:
        return list(self.info["tls"]["seeds"])

    def bad_cert_url(self, host: str, path: str = "/") -> str:
        """An https URL on one of the bad-certificate hosts (``tlscerts.BAD_CERT_HOSTS``)."""
        return f"https://{host}:{self.tls_port}{path}"

    @property
    def living(self) -> Living | None:
        """The living web's clock as the server uses it (from the ready file), None when static."""
        m = self.info.get("mutate")
        if not m:
            return None
        change = m.get("robots_change_s")
        return Living(float(m["epoch"]), float(m["rate"]), hostile_sitemaps=bool(m["hostile_sitemaps"]),
                      mix=str(m.get("mix", CLASSIC)), robots_change_s=math.inf if change is None else float(change),
                      throttle_every=int(m.get("throttle_every", 0)),
                      lying_validators=bool(m.get("lying_validators", False)))  # fmt: skip

    def test_time(self, wall: float | None = None) -> float:
        """The living web's test time now (or at ``wall``)."""
        living = self.living
        if living is None:
            raise TestbedError("test_time: this testbed was not started with mutate=True")
        return living.test_time(time.time() if wall is None else wall)

    def versions_at(self, *, wall: float | None = None, digests: bool = True) -> dict[str, Any]:
        """Every normal page's ``livetruth.PageVersion`` now (or at ``wall``), keyed by URL."""
        from pipeline.harness.testbed.livetruth import versions_at

        return dict(versions_at(self.web, self.test_time(wall), digests=digests))

    def url(self, i: int, path: str, *, scheme: str = "http") -> str:
        return self.web_for(scheme).url(i, path)

    def truth(self, *, max_depth: int = 20, scheme: str = "http") -> dict[str, Any]:
        from pipeline.harness.testbed.truth import compute_truth

        return compute_truth(self.web_for(scheme), max_depth=max_depth)

    def read_access_log(self) -> list[dict[str, Any]]:
        """Every complete line of the access log (flushed every 0.5 s, on ``flush_log`` and at shutdown)."""
        if not self.access_log.exists():
            return []
        out = []
        for line in self.access_log.read_text().splitlines():
            if line.endswith("}"):
                out.append(json.loads(line))
        return out

    def flush_log(self, *, attempts: int = 200) -> None:
        """Have every serving process write out its access-log buffer now (``accesslog.FLUSH_HOST``).

        Each flush request is answered after its process's buffer is on disk, with that process's pid. A
        testbed that has stopped flushed at its exit: nothing to do."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._ask_every_process(FLUSH_HOST, "access-log flush", attempts=attempts)

    def change_robots(self, *, attempts: int = 200) -> float:
        """Make the changing robots.txt change now (``living.ROBOTS_CHANGE_HOST``) in every serving process;
        returns the latest wall time one of them changed it at (each keeps the first: asked again, nothing
        moves). Needs a living web."""
        answers = self._ask_every_process(ROBOTS_CHANGE_HOST, "robots change", attempts=attempts)
        return max(float(rest) for rest in answers.values())

    def _ask_every_process(self, host: str, what: str, *, attempts: int) -> dict[int, str]:
        """A control request (``host``) to every HTTP process: with several sharing the sockets, fresh
        connections are made until each has answered. Its answer is its pid, then anything it adds; returns
        pid -> what it added."""
        want = {int(p) for p in self.info.get("http_pids") or [self.info.get("pid", 0)]}
        seen: dict[int, str] = {}
        for _ in range(attempts):
            conn = http.client.HTTPConnection(self.ips[0], self.port, timeout=30)
            try:
                conn.request("GET", "/", headers={"Host": host, "Connection": "close"})
                resp = conn.getresponse()
                body = resp.read().decode()
            finally:
                conn.close()
            if resp.status != 200:
                raise TestbedError(f"{what} request answered {resp.status}")
            pid, _, rest = body.partition(" ")
            seen[int(pid)] = rest
            if want <= set(seen):
                return seen
        raise TestbedError(f"{what} reached processes {sorted(seen)} of {sorted(want)}")

    def mark(self, label: str) -> float:
        """Log a sentinel request (Host ``sentinel.invalid``, path ``/label``) and return the time the
        server gave it: a point on the server's own clock, so a test can split the log at an event (say, a
        signal it sent just before) without comparing its clock with the server's."""
        conn = http.client.HTTPConnection(self.ips[0], self.port, timeout=30)
        try:
            conn.request("GET", f"/{label}", headers={"Host": SENTINEL_HOST, "Connection": "close"})
            conn.getresponse().read()
        finally:
            conn.close()
        self.flush_log()
        got = [e for e in self.read_access_log() if e["host"] == SENTINEL_HOST and e["path"] == f"/{label}"]
        if not got:
            raise TestbedError(f"sentinel /{label} is not in the access log")
        return float(got[-1]["t"])

    def log_between(self, begin: float, end: float) -> list[dict[str, Any]]:
        """The requests the server started between two ``mark`` times (the sentinels left out): a test's
        own requests on a testbed others share, cut by the server's clock alone."""
        self.flush_log()
        return [e for e in self.read_access_log() if begin < float(e["t"]) < end and e["host"] != SENTINEL_HOST]

    def wait_log_flush(self) -> None:
        """Every request the testbed has completed is in the access log when this returns (``flush_log``)."""
        self.flush_log()
