"""Segments at hdfs:// and s3:// URIs on the dev stack's real HDFS (WebHDFS) and S3 server: a node's whole
write under the part name and its rename into place, the link jobs' listing, a killed node's part adopted
(torn tail cut), retirement; then a link round of the real jobs (inline runner) over segments a node sink
wrote at the URI, the mappers opening the URIs themselves, giving the crawl db a local pass gives."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from jobs import cluster
from jobs.runner import LinkPipeline
from jobs.runnerconfig import RunnerConfig
from jobs.synth import make_results, write_segment
from pipeline.storage.segments import ABANDON_S, DONE_DIR, Segments
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.rules import RULES_KEY, CrawlLinkRules
from pipeline.transport.links.service import LinkJobsService
from pipeline.transport.wire.replies import LinksReport

pytestmark = pytest.mark.integration

RULES = CrawlLinkRules(("crawl.test",), 5, 10_000)


@pytest.fixture(params=["hdfs", "s3"])
def root(request: pytest.FixtureRequest, unique: str) -> str:
    if request.param == "hdfs":
        request.getfixturevalue("hdfs_yarn")
        return f"{cluster.namenode_uri()}/tmp/crawlfleet-tests/{unique}"
    request.getfixturevalue("s3_server")
    for key, value in cluster.s3_options().items():  # the variables a node or a task would be given
        if key in ("key", "secret", "endpoint_url"):
            os.environ[{"key": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY",
                        "endpoint_url": "AWS_ENDPOINT_URL"}[key]] = str(value)  # fmt: skip
    return f"s3://crawlfleet/tests/{unique}"


def test_commit_list_adopt_retire(root: str) -> None:
    segs = Segments(root)
    assert segs.closed() == []
    key = segs.close_part(segs.write_part("n1", "a.jsonl", b'{"a":1}\n'))
    segs.write_part("n2", "b.jsonl", b'{"b":1}\n{"torn":')  # a killed node's
    listed = segs.closed(now=time.time())  # a young part: maybe a live node's
    assert [s.key for s in listed] == [key] and listed[0].size == 8
    later = segs.closed(now=time.time() + ABANDON_S + 60)
    assert sorted(s.key for s in later) == ["n1/a.jsonl", "n2/b.jsonl"]
    assert list(segs.read_lines("n2/b.jsonl")) == [b'{"b":1}\n']
    segs.retire("n1/a.jsonl", keep=True)
    segs.retire("n2/b.jsonl", keep=False)
    assert segs.closed() == [] and segs.fs.exists(f"{segs.base}/{DONE_DIR}/n1/a.jsonl")
    segs.fs.rm(segs.base, recursive=True)


def test_a_link_round_over_remote_segments(root: str, tmp_path: Path) -> None:
    results = list(make_results(60, hosts=3, links=12, page_bytes=2000, seed=3))
    local = tmp_path / "local" / "n1" / "s.jsonl"
    write_segment(local, results)
    segs = Segments(root)
    for i, part in enumerate((results[:30], results[30:])):
        body = b"".join(line for line in local.read_bytes().splitlines(keepends=True)[i * 30 : (i + 1) * 30])
        assert len(part) == 30
        segs.close_part(segs.write_part(f"n{i}", f"s-{i}.jsonl", body))
    dbs = {}
    for name in ("ref", "svc"):
        with SqliteStore(tmp_path / f"{name}.db") as store:
            store.put_meta(RULES_KEY, RULES.to_json())
    ref = f"sqlite:{tmp_path / 'ref.db'}"
    LinkPipeline(RunnerConfig(work_dir=tmp_path / "wr"), RULES.job_args(store=ref, batch_size=50, lru_size=100)
                 ).process_many([local], name="ref")  # fmt: skip
    published: list[LinksReport] = []
    svc = LinkJobsService(segments=root, store=f"sqlite:{tmp_path / 'svc.db'}", runner=RunnerConfig(work_dir=tmp_path / "w"),
                          publish=published.append, batch_size=50, lru_size=100, poll_s=0.05)  # fmt: skip
    svc.run(stop=lambda: svc.rounds > 0 and not Segments(root).closed() and svc._next is None)
    assert sorted(k for r in published for k in r.segments) == ["n0/s-0.jsonl", "n1/s-1.jsonl"]
    for name in ("ref", "svc"):
        with SqliteStore(tmp_path / f"{name}.db") as store:
            dbs[name] = {r.url: r.inlinks for h, _ in store.pending_hosts() for r in store.pending(h, 10_000)}
    assert dbs["svc"] and dbs["svc"] == dbs["ref"]
    with contextlib.suppress(FileNotFoundError):  # S3 has no directories: nothing left once merged
        segs.fs.rm(segs.base, recursive=True)
