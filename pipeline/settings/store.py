"""Where pages and the crawl db live: SQLite or HBase, WARC, the seen-set.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoreSettings:
    kind: str = "sqlite"  # sqlite | hbase
    hbase_host: str = "127.0.0.1"
    hbase_port: int = 9090
    hbase_prefix: str = "crawlfleet"
    hbase_batch_size: int = 200
    warc: bool = False
    warc_max_bytes: int = 1024 * 1024 * 1024
    # The seen-set in front of the store: S5's LRU of recent fingerprints, then an exact table of up to
    # this many fingerprints at 8 B each (64 MiB at the default; 0 turns it off). See pipeline/frontier/dedup.py.
    seen_lru_size: int = 200_000
    seen_table_max_urls: int = 8_000_000
    # Embedded crawl: apply result writes on a thread of their own (pipeline/storage/writebehind.py),
    # so SQLite and the body log's writes can overlap fetching and parsing on a second core. Off: on
    # the 10k bench it cost more CPU per page (thread hand-offs) than it moved off the crawl's thread.
    write_behind: bool = False
