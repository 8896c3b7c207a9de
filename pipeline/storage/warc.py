"""WARC 1.1 output (warcio): a request and a response record per page, files rotated by size.

Contracts:
- Each file starts with a ``warcinfo`` record; each page gives a ``request`` and a ``response``
  record (``WARC-Concurrent-To`` links them), plus a ``metadata`` record listing the redirect chain
  when there was one. A page's records never span two files.
- The response's HTTP block is the stored body under the stored headers, minus the headers that no
  longer describe it (``Content-Encoding``/``Transfer-Encoding``: the fetcher stored the decoded
  body) and with ``Content-Length`` set to the stored length. Truncated bodies carry
  ``WARC-Truncated: length``. Block and payload digests are written, so ``warcio check`` verifies.
- A new file is started once the current one has reached ``max_bytes`` (so files exceed it by at
  most one page's records). Files are named ``PREFIX-YYYYmmddHHMMSS-NNNNN.warc.gz`` (NNNNN: the next free).
- ``write_exchange`` writes what went over the wire instead (``pipeline.storage.warcwire``): the crawl's
  live WARC, one request/response pair per exchange, redirect hops and robots.txt included. Pages
  written by ``write_page`` (``export warc``, from the store) are rebuilt from what the store kept: the
  headers it kept, the decoded body, the user-agent the writer was given.
- ``info``: the warcinfo fields (``pipeline.storage.warcinfo.crawl_info``); every record of a file
  names the file's warcinfo record in ``WARC-Warcinfo-ID``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from fetchers.wire import WireRecord
from pipeline.settings import Settings
from pipeline.storage.base import PageRecord
from pipeline.storage.warcinfo import CONFORMS_TO, FORMAT, crawl_info, software
from pipeline.storage.warcwire import Earlier, exchange_records

_DROP = {"content-encoding", "transfer-encoding", "content-length"}
SOFTWARE = "crawlfleet"


@dataclass(slots=True)
class WarcStats:
    pages: int = 0
    exchanges: int = 0
    records: int = 0
    files: list[Path] = field(default_factory=list)


def _warc_date(ts: float) -> str:
    return datetime_to_iso_date(datetime.fromtimestamp(ts, UTC).replace(tzinfo=None), use_micros=True)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class WarcWriter:
    """Writes pages into size-rotated WARC 1.1 files under ``out_dir``. Use as a context manager."""

    def __init__(
        self,
        out_dir: str | Path,
        *,
        max_bytes: int = 1 << 30,
        prefix: str = "crawlfleet",
        gzip: bool = True,
        info: Mapping[str, str] | None = None,
        revisit_memory: int = 100_000,
    ) -> None:
        self.info = dict(info) if info is not None else {"software": software(), "format": FORMAT,
                                                          "conformsTo": CONFORMS_TO, "isPartOf": prefix}
        self.user_agent = self.info.get("http-header-user-agent", SOFTWARE)
        self._info_id = ""
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.prefix = prefix
        self.gzip = gzip
        self.stats = WarcStats()
        self._stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        self._file: BinaryIO | None = None
        self._writer: WARCWriter | None = None
        self.revisit_memory = revisit_memory
        self._earlier: OrderedDict[str, Earlier] = OrderedDict()

    def _rotate(self) -> WARCWriter:
        if self._file is not None and self._writer is not None and self._file.tell() < self.max_bytes:
            return self._writer
        self._close_file()
        n = len(self.stats.files) + 1
        while True:  # a writer started in the same second with the same prefix (a restarted process) goes on
            path = self.out_dir / f"{self.prefix}-{self._stamp}-{n:05d}.warc{'.gz' if self.gzip else ''}"
            try:
                self._file = open(path, "xb")  # noqa: SIM115 - closed in _close_file/close
                break
            except FileExistsError:
                n += 1
        self._writer = WARCWriter(self._file, gzip=self.gzip, warc_version="1.1")
        info = self._writer.create_warcinfo_record(path.name, self.info)
        self._info_id = info.rec_headers.get_header("WARC-Record-ID")
        self._writer.write_record(info)
        self.stats.files.append(path)
        self.stats.records += 1
        return self._writer

    def write_page(self, page: PageRecord) -> None:
        writer = self._rotate()
        uri = page.final_url or page.url
        date = _warc_date(page.fetched_at)
        parts = urlsplit(uri)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

        headers = [(k, v) for k, v in page.headers.items() if k.lower() not in _DROP]
        headers.append(("Content-Length", str(len(page.body))))
        http = StatusAndHeaders(f"{page.status} {_reason(page.status)}", headers, protocol="HTTP/1.1")
        resp_headers = {"WARC-Date": date, "WARC-Warcinfo-ID": self._info_id}
        if page.ip:
            resp_headers["WARC-IP-Address"] = page.ip.strip("[]")
        if page.truncated:
            resp_headers["WARC-Truncated"] = "length"
        response = writer.create_warc_record(
            uri, "response", payload=BytesIO(page.body), length=len(page.body),
            http_headers=http, warc_headers_dict=resp_headers,
        )  # fmt: skip
        resp_id = response.rec_headers.get_header("WARC-Record-ID")

        req_http = StatusAndHeaders(
            f"GET {target} HTTP/1.1", [("Host", parts.netloc), ("User-Agent", self.user_agent)], is_http_request=True
        )
        request = writer.create_warc_record(
            uri, "request", payload=BytesIO(b""), length=0, http_headers=req_http,
            warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": resp_id, "WARC-Warcinfo-ID": self._info_id},
        )  # fmt: skip
        writer.write_record(response)
        writer.write_record(request)
        self.stats.records += 2
        if page.redirects:
            chain = "".join(f"via: {u}\r\n" for u in page.redirects).encode()
            meta = writer.create_warc_record(
                uri, "metadata", payload=BytesIO(chain), length=len(chain),
                warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": resp_id, "WARC-Warcinfo-ID": self._info_id},
            )  # fmt: skip
            writer.write_record(meta)
            self.stats.records += 1
        self.stats.pages += 1

    def write_exchange(self, wire: WireRecord) -> None:
        """One exchange as sent and received: its response record, then its request record. A 304, or a
        200 whose payload this writer wrote last for the URL, is a revisit record (``warcwire``)."""
        writer = self._rotate()
        earlier = self._earlier.get(wire.url)
        for record in exchange_records(wire, warcinfo_id=self._info_id, earlier=earlier):
            writer.write_record(record)
            self.stats.records += 1
            if record.rec_type == "response":
                self._remember(wire.url, record)
        self.stats.exchanges += 1

    def _remember(self, url: str, record: ArcWarcRecord) -> None:
        """The URL's last response, for identical-payload-digest revisits (bounded: oldest URLs forgotten)."""
        h = record.rec_headers
        self._earlier[url] = Earlier(h.get_header("WARC-Payload-Digest"), h.get_header("WARC-Date"),
                                     h.get_header("WARC-Record-ID"))  # fmt: skip
        self._earlier.move_to_end(url)
        if len(self._earlier) > self.revisit_memory:
            self._earlier.popitem(last=False)

    def write_pages(self, pages: Iterable[PageRecord]) -> WarcStats:
        for page in pages:
            self.write_page(page)
        return self.stats

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._writer = None

    def close(self) -> None:
        self._close_file()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def live_writer(settings: Settings, warc_dir: str | Path, fetcher_id: str) -> WarcWriter:
    """The writer one fetcher process archives its exchanges to (``write_exchange``): files of its own,
    ``crawlfleet-FETCHER-...``, each opening with the crawl's warcinfo."""
    return WarcWriter(warc_dir, max_bytes=settings.store.warc_max_bytes, prefix=f"crawlfleet-{fetcher_id}",
                      info=crawl_info(settings))  # fmt: skip
