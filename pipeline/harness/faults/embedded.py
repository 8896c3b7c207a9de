"""Fault trials on the embedded default: the ``crawlfleet crawl`` process itself, and the DNS server under it.

- ``crawler/kill``: SIGKILL the crawler once a seeded share of the expected requests has reached the
  testbed, then ``crawlfleet crawl --resume`` in the same directory.
- ``crawler/stop``: SIGSTOP it there for a seeded time, then SIGCONT.
- ``parser/kill`` or ``parser/stop``: SIGKILL or SIGSTOP the crawler's parse process
  (pipeline/embedded/parseproc.py) there; the crawler delivers what the dead child held unprepared and starts
  another, and replaces a stopped one after ``parseproc.STALL_S``. The crawler itself never stops, so
  not even a request in flight may be asked twice.
- ``fetcher/kill`` or ``fetcher/stop``: the crawl runs two fetch processes (``fetch.processes = 2``,
  pipeline/embedded/fetchproc.py); SIGKILL or SIGSTOP one of them there. A killed one's batches go back
  and the next batch starts another; a stopped one holds its batches until SIGCONT.
- ``unbound/kill``: the crawler resolves through a private unbound in front of the testbed's zone;
  SIGKILL unbound at the seeded point and start it again on the same port after a seeded pause.

Each trial returns a ``fault`` record (see pipeline.harness.faults.results) judged by
pipeline.harness.faults.accounting from the access log, the truth, the store and the strike: the
processes each signal reached, by pid (the crawl sends ``pid/<n>`` in its User-Agent,
``fetch.identify_process``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from pipeline.harness.faults.accounting import RECENT_S, Strike, account, pid_of
from pipeline.harness.faults.bed import FAST_S, PACE_S, Bed, TrialPlan
from pipeline.harness.faults.procs import HarnessError, Managed, wait_until
from pipeline.harness.faults.snapshot import stored_urls

CRAWL_TIMEOUT_S = 240.0


def crawl_args(bed: Bed, out: Path, *, dns: str | None = None, extra: tuple[str, ...] = (),
               host_delay: float = FAST_S) -> list[str]:  # fmt: skip
    tb = bed.tb
    return [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out),
        "--dns-server", dns or f"127.0.0.1:{tb.dns_port}", "--allow-network", "127.0.10.0/24",
        "--max-depth", str(bed.max_depth), "--host-delay", str(host_delay), "--json", "--no-progress", *extra,
    ]  # fmt: skip


def crawler(bed: Bed, workdir: Path, *, dns: str | None = None, parse_processes: int | None = None,
            fetch_processes: int | None = None, host_delay: float = FAST_S) -> Managed:  # fmt: skip
    """The crawler of a trial; ``parse_processes`` and ``fetch_processes`` pin ``fetch.parse_processes``
    and ``fetch.processes`` (default: the crawl's); ``host_delay``: bed.FAST_S, or bed.PACE_S when the
    trial strikes a fetching process."""
    out = workdir / "out"
    env = dict(os.environ, PYTHONUNBUFFERED="1", CRAWLFLEET_FETCH_IDENTIFY_PROCESS="true")
    if parse_processes is not None:
        env["CRAWLFLEET_FETCH_PARSE_PROCESSES"] = str(parse_processes)
    if fetch_processes is not None:
        env["CRAWLFLEET_FETCH_PROCESSES"] = str(fetch_processes)
    return Managed("crawler", crawl_args(bed, out, dns=dns, host_delay=host_delay), env, workdir / "crawler.log",
                   stdout_path=workdir / "crawler.out")  # fmt: skip


def last_json(path: Path) -> dict[str, Any]:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.startswith("{")]
    if not lines:
        raise HarnessError(f"no JSON summary in {path}")
    return dict(json.loads(lines[-1]))


def wait_share(bed: Bed, start: float, plan: TrialPlan, proc: Managed, *, timeout_s: float = 120.0) -> int:
    """Block until ``plan.at_fraction`` of the expected requests have reached the testbed; returns that count."""
    target = max(1, int(bed.expected_requests * plan.at_fraction))

    def reached() -> bool:
        if not proc.running:
            raise HarnessError(f"{proc.name} exited before the fault point:\n{proc.log_tail()}")
        return bed.count_since(start) >= target

    wait_until(reached, timeout_s=timeout_s, every_s=0.05, what=f"{target} requests")
    return target


def finish(bed: Bed, proc: Managed, *, timeout_s: float = CRAWL_TIMEOUT_S) -> tuple[dict[str, Any], float]:
    code = proc.wait(timeout_s)
    end_t = time.time()
    if code != 0:
        raise HarnessError(f"{proc.name} exited with {code}:\n{proc.log_tail()}")
    assert proc.stdout_path is not None
    return last_json(proc.stdout_path), end_t


def crawler_trial(bed: Bed, workdir: Path, plan: TrialPlan) -> dict[str, Any]:
    """``crawler/kill`` or ``crawler/stop`` (see the module docstring)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "out"
    start = time.time()
    proc = crawler(bed, workdir, host_delay=PACE_S).start()
    try:
        at = wait_share(bed, start, plan, proc)
        if plan.action == "kill":
            fault_t = proc.kill()
            time.sleep(plan.down_s)
            back_t = time.time()
            proc.start(proc.cmd + ["--resume"])
        elif plan.action == "stop":
            fault_t = proc.pause()
            time.sleep(plan.down_s)
            back_t = proc.resume()
        else:
            raise ValueError(f"unknown action {plan.action!r}")
        struck = proc.struck  # the crawler and its children: it fetches in its own process
        summary, end_t = finish(bed, proc)
    finally:
        proc.terminate()
    return _judged(bed, out, plan, at, summary, start=start,
                   strike=Strike("crawler", _SIG[plan.action], fault_t, back_t, struck, end_t))  # fmt: skip


_SIG = {"kill": "SIGKILL", "stop": "SIGSTOP"}


def parser_trial(bed: Bed, workdir: Path, plan: TrialPlan) -> dict[str, Any]:
    """``parser/kill`` or ``parser/stop`` (see the module docstring)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "out"
    start = time.time()
    proc = crawler(bed, workdir, parse_processes=1).start()
    try:
        at = wait_share(bed, start, plan, proc)
        children = _parse_processes(proc.pid)
        if len(children) != 1:
            raise HarnessError(f"expected one parse process, found {len(children)}")
        child = children[0]
        if plan.action not in ("kill", "stop"):
            raise ValueError(f"unknown action {plan.action!r}")
        fault_t = time.time()
        child.send_signal(signal.SIGKILL if plan.action == "kill" else signal.SIGSTOP)

        def replaced() -> bool:
            return any(c.pid != child.pid for c in _parse_processes(proc.pid)) or not proc.running

        wait_until(replaced, timeout_s=60.0, every_s=0.05, what="a new parse process")
        back_t = time.time()
        summary, end_t = finish(bed, proc)
    finally:
        proc.terminate()
    # The parse process fetches nothing: its strike names no fetching process, so no repeat is excused.
    return _judged(bed, out, plan, at, summary, start=start,
                   strike=Strike("parser", _SIG[plan.action], fault_t, back_t, end_t=end_t))  # fmt: skip


def _parse_processes(pid: int) -> list[Any]:
    """The live parse processes of the crawler ``pid`` (a killed one is skipped while it is a zombie)."""
    return _children(pid, "pipeline.embedded.parsechild")


def _children(pid: int, module: str) -> list[Any]:
    """The live children of ``pid`` running ``module`` (a killed one is skipped while it is a zombie)."""
    import psutil

    out = []
    for child in psutil.Process(pid).children():
        try:
            if module in " ".join(child.cmdline()):
                out.append(child)
        except psutil.Error:  # gone, or a zombie its parent has not reaped yet
            continue
    return out


FETCH_PROCESSES = 2
KILL_ATTEMPTS = 3  # a fetch process is idle between batches; a kill that finds it so is tried again


def fetcher_trial(bed: Bed, workdir: Path, plan: TrialPlan) -> dict[str, Any]:
    """``fetcher/kill`` or ``fetcher/stop`` (see the module docstring).

    The strike waits for a fetch process that is using CPU (it has results in hand). A killed process
    that the access log shows making no request in the ``RECENT_S`` before its kill (nor one in flight)
    had nothing a kill could cost, so the replacement is struck again, up to ``KILL_ATTEMPTS`` kills in
    all; the trial is judged at the last kill (the earlier ones may excuse nothing)."""
    if plan.action not in ("kill", "stop"):
        raise ValueError(f"unknown action {plan.action!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "out"
    start = time.time()
    proc = crawler(bed, workdir, fetch_processes=FETCH_PROCESSES, host_delay=PACE_S).start()
    kills = 0
    try:
        at = wait_share(bed, start, plan, proc)
        if plan.action == "stop":
            child = _busy_fetch_process(proc)
            fault_t = time.time()
            child.send_signal(signal.SIGSTOP)
            time.sleep(plan.down_s)
            child.send_signal(signal.SIGCONT)
            back_t = time.time()
        else:
            for kills in range(1, KILL_ATTEMPTS + 1):  # noqa: B007 - the count is reported
                child = _busy_fetch_process(proc)
                fault_t = time.time()
                child.send_signal(signal.SIGKILL)

                def replaced(dead: int = child.pid) -> bool:
                    pids = {c.pid for c in _children(proc.pid, "pipeline.embedded.fetchchild")}
                    return len(pids - {dead}) == FETCH_PROCESSES or not proc.running

                wait_until(replaced, timeout_s=60.0, every_s=0.01, what="a new fetch process")
                back_t = time.time()
                if _had_work(bed, start, child.pid, fault_t) or not proc.running:
                    break
        summary, end_t = finish(bed, proc)
    finally:
        proc.terminate()
    strike = Strike("fetcher", _SIG[plan.action], fault_t, back_t, frozenset({child.pid}), end_t)
    rec = _judged(bed, out, plan, at, summary, start=start, strike=strike,
                  mode=f"embedded, {FETCH_PROCESSES} fetch processes")  # fmt: skip
    rec["kills"] = kills
    # The other fetch process never stopped, so "the first request after the fault" says nothing of
    # this one: recovery is when a URL the struck process asked for in its last RECENT_S was asked
    # again by another (kill), or SIGCONT (stop).
    log = bed.window(start)
    mine = {(str(e["host"]), str(e["path"])) for e in log
            if pid_of(str(e.get("ua", ""))) == child.pid and float(e["t"]) >= fault_t - RECENT_S}  # fmt: skip
    again = [float(e["t"]) for e in log if float(e["t"]) >= fault_t and pid_of(str(e.get("ua", ""))) != child.pid
             and (str(e["host"]), str(e["path"])) in mine]  # fmt: skip
    rec["recovery_s"] = round((min(again) if again and plan.action == "kill" else back_t) - fault_t, 3)
    return rec


def _had_work(bed: Bed, start: float, pid: int, fault_t: float) -> bool:
    """Did ``pid`` make a request in the ``RECENT_S`` before ``fault_t`` (or one still in flight then)?"""
    bed.settle()
    return any(pid_of(str(e.get("ua", ""))) == pid and float(e.get("end", e["t"])) >= fault_t - RECENT_S
               for e in bed.window(start))  # fmt: skip


def _busy_fetch_process(proc: Managed, *, timeout_s: float = 30.0) -> Any:
    """A fetch process of the crawler that used CPU in the last 10 ms (so likely holds a batch)."""
    import psutil

    found: list[Any] = []

    def busy() -> bool:
        if not proc.running:
            raise HarnessError(f"the crawler exited before the fault:\n{proc.log_tail()}")
        children = _children(proc.pid, "pipeline.embedded.fetchchild")
        try:
            before = {c.pid: sum(c.cpu_times()[:2]) for c in children}
            time.sleep(0.01)
            for c in children:
                if sum(c.cpu_times()[:2]) > before[c.pid]:
                    found.append(c)
                    return True
        except psutil.Error:
            return False
        return False

    wait_until(busy, timeout_s=timeout_s, every_s=0.0, what="a busy fetch process")
    return found[0]


def unbound_trial(bed: Bed, workdir: Path, plan: TrialPlan) -> dict[str, Any]:
    """``unbound/kill``: the crawler's DNS server dies and comes back on the same port."""
    from pipeline.harness.faults.services import PrivateUnbound

    workdir.mkdir(parents=True, exist_ok=True)
    dns = PrivateUnbound(bed.tb.dns_port, workdir / "unbound").start()
    out = workdir / "out"
    start = time.time()
    proc = crawler(bed, workdir, dns=dns.address).start()
    try:
        at = wait_share(bed, start, plan, proc)
        fault_t = dns.proc.kill() if plan.action == "kill" else dns.proc.pause()
        time.sleep(plan.down_s)
        if plan.action == "kill":
            dns.restart()
            back_t = time.time()
        else:
            back_t = dns.proc.resume()
        summary, end_t = finish(bed, proc)
    finally:
        proc.terminate()
        dns.stop()
    return _judged(bed, out, plan, at, summary, start=start,
                   strike=Strike("unbound", _SIG[plan.action], fault_t, back_t, end_t=end_t))  # fmt: skip


def _judged(bed: Bed, out: Path, plan: TrialPlan, at: int, summary: dict[str, Any], *, start: float,
            strike: Strike, mode: str = "embedded") -> dict[str, Any]:  # fmt: skip
    """The trial's record, judged once the testbed has flushed its log: the access log since ``start``
    against the truth, the store, and the strike."""
    bed.settle()
    acc = account(truth=bed.truth, log=bed.window(start), stored_urls=stored_urls(out), strike=strike)
    return _record(mode, plan, at, acc.to_json(), summary, start, strike.end_t)


def _record(mode: str, plan: TrialPlan, at: int, acc: dict[str, Any], summary: dict[str, Any],
            start: float, end_t: float) -> dict[str, Any]:  # fmt: skip
    keep = ("pages_fetched", "pages_failed", "errors_by_class", "results_dropped", "elapsed_s")
    return {
        "type": "fault", "mode": mode, "component": plan.component, "action": plan.action, "seed": plan.seed,
        "at_fraction": plan.at_fraction, "fault_after_requests": at, "down_s": plan.down_s,
        "wall_s": round(end_t - start, 3), **acc, "summary": {k: summary.get(k) for k in keep},
    }  # fmt: skip
