"""A crawl's WARC replayed against the testbed's truth (#21 point 6).

The crawler runs as a real subprocess with ``--warc`` on a testbed that gzips pages. Its WARC files must
pass ``warcio check``, and read back with warcio they must hold: one response record (with its request
record) for every request in the testbed's access log and nothing else (robots.txt and every redirect
hop included); each response byte for byte as the testbed's server writes it (its own head builder
and renderer, so header case and order, gzip bodies, Location headers); each request with the
user-agent given and the Host the URL names. Run in the crawl's process and in a fetch process.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from pipeline.harness.testbed.accesslog import AccessLog
from pipeline.harness.testbed.fastserver import FastHTTP, _head
from pipeline.harness.testbed.harness import TestbedProcess

pytestmark = pytest.mark.e2e
UA = "ReplayBot/2.0 (+https://replay.example/bot; archive@replay.example)"


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tb = TestbedProcess(6, 30, seed=5, extra_args=("--gzip-pages",), workdir=tmp_path_factory.mktemp("tb-warc")).start()
    yield tb
    tb.close()


def _crawl(tb: TestbedProcess, out: Path, processes: int) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "pipeline.cli", "crawl", *tb.seeds, "--out", str(out), "--dns-server", tb.dns_server,
        "--allow-network", "127.0.10.0/24", "--host-delay", "0.01", "--user-agent", UA, "--warc", "--json",
        "--no-progress",
    ]  # fmt: skip
    env = dict(os.environ, CRAWLFLEET_FETCH_PROCESSES=str(processes))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _read(files: list[Path]) -> list[tuple[str, dict[str, str], bytes]]:
    """(type, WARC headers, block as stored); digests checked by warcio on a first pass."""
    out = []
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                rec.content_stream().read()
                assert rec.digest_checker.passed is not False, rec.digest_checker.problems
        with open(path, "rb") as fh:
            out += [(r.rec_type, dict(r.rec_headers.headers), r.raw_stream.read())
                    for r in ArchiveIterator(fh, no_record_parse=True)]  # fmt: skip
    return out


@pytest.mark.parametrize("processes", [0, 1], ids=["in-process", "fetch-process"])
def test_warc_replays_what_the_testbed_sent(testbed: TestbedProcess, tmp_path: Path, processes: int) -> None:
    tb = testbed
    before = len(tb.read_access_log())
    summary = _crawl(tb, tmp_path / "out", processes)
    assert summary["pages_fetched"] > 100
    files = sorted((tmp_path / "out" / "warc").glob("*.warc.gz"))
    assert files and [f.name for f in files] == summary["warc_files"]

    warcio = shutil.which("warcio") or str(Path(sys.executable).with_name("warcio"))
    check = subprocess.run([warcio, "check", "-v", *map(str, files)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]

    records = _read(files)
    infos = [block.decode() for kind, _, block in records if kind == "warcinfo"]
    assert len(infos) == len(files)
    assert f"http-header-user-agent: {UA}\r\n" in infos[0] and "robots: obey\r\n" in infos[0]
    assert "operator: +https://replay.example/bot; archive@replay.example\r\n" in infos[0]
    assert '"max_depth":20' in infos[0] and "software: crawlfleet/" in infos[0]

    by_id = {h["WARC-Record-ID"]: (kind, h, block) for kind, h, block in records}
    responses = [(h, block) for kind, h, block in records if kind == "response"]
    requests = [(h, block) for kind, h, block in records if kind == "request"]
    assert len(requests) == len(responses)
    for h, block in requests:  # the request as sent: real UA, the URL's Host, paired with its response
        kind, rh, _ = by_id[h["WARC-Concurrent-To"]]
        assert kind == "response" and rh["WARC-Target-URI"] == h["WARC-Target-URI"]
        parts = urlsplit(h["WARC-Target-URI"])
        assert block.startswith(f"GET {parts.path}{'?' + parts.query if parts.query else ''} HTTP/1.1\r\n".encode())
        assert f"\r\nHost: {parts.netloc}\r\n".encode() in block and f"\r\nUser-Agent: {UA}\r\n".encode() in block
        assert block.endswith(b"\r\n\r\n")

    # One response record per request the testbed logged, and no other.
    tb.wait_log_flush()
    logged = collections.Counter((e["host"], e["path"]) for e in tb.read_access_log()[before:])
    archived = collections.Counter(
        (urlsplit(h["WARC-Target-URI"]).hostname, _target(h["WARC-Target-URI"])) for h, _ in responses
    )
    assert archived == logged

    # Each response byte for byte as the testbed's server writes it (gzip pages, redirects, 404s, robots).
    server = FastHTTP(tb.web, AccessLog(None), gzip_pages=True)
    statuses: collections.Counter[int] = collections.Counter()
    locations: list[tuple[str, str]] = []
    for h, block in responses:
        uri = h["WARC-Target-URI"]
        parts = urlsplit(uri)
        reply = server.reply_for(parts.netloc.encode(), _target(uri).encode(), "", gzip_ok=True)
        sent = _head(reply, close=False) + reply.body
        if "WARC-Truncated" in h:  # the fetcher's body cap: what it read, as sent, up to where it stopped
            assert h["WARC-Truncated"] == "length" and sent.startswith(block) and len(block) < len(sent), uri
        else:
            assert block == sent, uri
        assert h["WARC-IP-Address"] in tb.ips
        statuses[reply.status] += 1
        if 300 <= reply.status < 400:
            locations.append((uri, dict(reply.headers)["Location"]))
    assert statuses[200] and statuses[404] and any(b"Content-Encoding: gzip" in b for _, b in responses)
    # Every redirect hop is its own response record, and its target has one too.
    assert len(locations) >= 2
    uris = {h["WARC-Target-URI"] for h, _ in responses}
    for uri, location in locations:
        assert urljoin(uri, location) in uris


def _target(uri: str) -> str:
    parts = urlsplit(uri)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
