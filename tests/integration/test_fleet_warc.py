"""Fleet WARC from the wire (#21 point 6 on fleet nodes): with ``dispatcher --warc`` each node's fetchers
record every exchange as it went over the wire, under OUT/warc/NODE. Judged by ``warcio check`` and
against the testbed's access log: one request/response pair per request the testbed served (robots.txt,
redirect hops and retries included), requests carrying the user agent the node was given."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from pipeline.harness.testbed.harness import TestbedProcess
from tests.fixtures.rabbitmq import MAX_DEPTH, check_truth

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

UA = "FleetArchiveBot/1.0 (+https://archive.example/bot)"


def test_nodes_write_warc_from_the_wire(rabbitmq: str, fleet: Any, tmp_path: Path) -> None:
    with TestbedProcess(6, 20, seed=14, workdir=tmp_path / "tb") as tb:
        f = fleet(rabbitmq, tb, max_depth=MAX_DEPTH,  # the configured User-Agent, as sent: no pid suffix
                  extra_env={"CRAWLFLEET_FETCH_USER_AGENT": UA, "CRAWLFLEET_FETCH_IDENTIFY_PROCESS": "false"})
        f.start_worker(1)
        f.start_worker(2)
        f.start_dispatcher("--warc")
        f.wait_dispatcher()
        f.stop()  # the workers close their WARC files as they stop
        check_truth(tb, tb.truth(max_depth=MAX_DEPTH), nodes=2)
        tb.wait_log_flush()
        served = len(tb.read_access_log())
    files = sorted((f.out / "warc").glob("*/*.warc.gz"))
    # Every node that fetched wrote its own WARC (which nodes fetch is S1's choice by u = p*s + q - r, and
    # in a crawl this small one node may take every batch).
    fetched_by = {ev["node"] for ev in f.events() if ev["ev"] == "done" and ev.get("pages")}
    assert fetched_by and {p.parent.name for p in files} == fetched_by <= {f.node(1), f.node(2)}
    warcio = shutil.which("warcio") or str(Path(sys.executable).with_name("warcio"))
    check = subprocess.run([warcio, "check", *map(str, files)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    kinds: dict[str, int] = {}
    agents: set[str] = set()
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                kinds[rec.rec_type] = kinds.get(rec.rec_type, 0) + 1
                if rec.rec_type == "request":
                    agents.add(rec.http_headers.get_header("User-Agent") or "")
    assert kinds["response"] == kinds["request"] == served
    assert agents == {UA}
