"""Redirects in the fleet go through the seen-set like links (issue #22, 5), judged from the access log.

A fleet node has no seen-set: it never follows a redirect (``fetchers.redirects.stop_at_redirects``);
it records the 3xx with ``final_url`` = its target, and the link jobs (``jobs.logic.page_candidates``)
hand the target to the crawl db like any link, where the seen-set drops a known one. Seeded with
``/r/0`` and ``/moved/0`` (its chain's end), ``/loop/a`` and ``/loop/b``, and ``/r/1`` alone: every
URL of the chains is requested exactly once, and ``/moved/1``, reached only through redirects, is
fetched and stored. Real RabbitMQ, a real worker, the real dispatcher and link jobs.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.testbed.harness import TestbedProcess
from tests.e2e.test_redirect_seen import CHAINS, redirect_host
from tests.fixtures.rabbitmq import ROOT, stored_pages

pytestmark = pytest.mark.integration


def test_fleet_nodes_stop_at_redirects_and_targets_go_through_the_seen_set(rabbitmq: str, fleet: Any,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    with TestbedProcess(8, 6, seed=3, workdir=tmp_path / "tb") as tb:
        i = redirect_host(tb)
        seeds = [tb.url(i, p) for p in ("/r/0", "/moved/0", "/loop/a", "/loop/b", "/r/1")]
        f = fleet(rabbitmq, tb, max_depth=0, host_delay=0.01)
        f.start_worker(1)
        cmd = [sys.executable, "-m", "pipeline.cli", "dispatcher", *seeds, "--out", str(f.out), "--json",
               "--no-progress"]  # fmt: skip
        err = open(f.workdir / "dispatcher.log", "a")  # noqa: SIM115 - owned by the process
        f.dispatcher = subprocess.Popen(
            cmd, env=f.env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT
        )
        f.start_links()
        f.wait_dispatcher(timeout_s=120)
        tb.wait_log_flush()
        host = tb.url(i, "/").split("//")[1].split(":")[0]
        counts = collections.Counter(e["path"] for e in tb.read_access_log() if e["host"] == host)
    assert {p: counts[p] for p in CHAINS} == dict.fromkeys(CHAINS, 1), counts
    _, reached = stored_pages(f.out)
    assert tb.url(i, "/moved/1") in reached
