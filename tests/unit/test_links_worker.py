"""The link service's extract worker (``pipeline.transport.links.worker``) exits when the service that
started it is killed, instead of waiting on its task pipe for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

SERVICE = """
import os, sys, time
from pipeline.transport.links.worker import extract_pool
pool = extract_pool()
print(pool.submit(os.getpid).result(), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_worker_of_a_killed_service_exits() -> None:
    service = subprocess.Popen([sys.executable, "-c", SERVICE], stdout=subprocess.PIPE, text=True,
                               cwd=os.getcwd())  # fmt: skip
    try:
        assert service.stdout is not None
        worker = int(service.stdout.readline())
        assert _alive(worker)
        service.send_signal(signal.SIGKILL)
        service.wait(10)
        deadline = time.monotonic() + 30  # a bound on waiting, not a measured figure
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker)
    finally:
        if service.poll() is None:
            service.kill()
