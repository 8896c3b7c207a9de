"""Pick and open a Store: from typed settings (the crawl) or from a spec string (the CLI).

Spec strings: ``sqlite:PATH`` (a database file, or a directory holding ``crawl.db``), ``hbase``
(the settings' host, port and prefix), ``hbase://HOST:PORT/PREFIX`` (any part may be left out).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pipeline.settings import StoreSettings
from pipeline.storage.base import Store

DB_NAME = "crawl.db"
# The crawl directory when ``--out`` is not given (``crawl``, ``dispatcher``); ``links`` and ``export``
# default to it too, so the commands of one crawl agree without flags.
DEFAULT_CRAWL_DIR = "crawl-out"


def sqlite_path(path: str | Path) -> Path:
    """The database file for ``path``: itself, or ``path/crawl.db`` when it is a directory."""
    p = Path(path)
    return p / DB_NAME if p.is_dir() or str(path).endswith("/") else p


def from_settings(settings: StoreSettings, path: str | Path) -> Store:
    """The store ``settings.kind`` names. ``path`` is the SQLite location (unused by HBase)."""
    if settings.kind == "sqlite":
        from pipeline.storage.sqlite import SqliteStore

        return SqliteStore(sqlite_path(path))
    if settings.kind == "hbase":
        from pipeline.storage.hbase import HBaseStore

        return HBaseStore(
            settings.hbase_host, settings.hbase_port, prefix=settings.hbase_prefix, batch_size=settings.hbase_batch_size
        )
    raise ValueError(f"unknown store kind {settings.kind!r} (sqlite | hbase)")


def is_hbase_spec(spec: str) -> bool:
    """Whether a spec string names an HBase store (``hbase`` or ``hbase://...``)."""
    return spec == "hbase" or spec.startswith("hbase://")


def from_spec(spec: str, settings: StoreSettings | None = None) -> Store:
    """Open the store a spec string names (see the module docstring); ``settings`` fills the gaps."""
    base = settings or StoreSettings()
    if spec.startswith("sqlite:"):
        return from_settings(StoreSettings(kind="sqlite"), spec.removeprefix("sqlite:"))
    if is_hbase_spec(spec):
        parts = urlsplit(spec) if spec != "hbase" else None
        host = (parts.hostname if parts else None) or base.hbase_host
        port = (parts.port if parts else None) or base.hbase_port
        prefix = (parts.path.strip("/") if parts else "") or base.hbase_prefix
        hbase = StoreSettings(kind="hbase", hbase_host=host, hbase_port=port, hbase_prefix=prefix,
                              hbase_batch_size=base.hbase_batch_size)  # fmt: skip
        return from_settings(hbase, "")
    raise ValueError(f"store spec {spec!r}: expected sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX")
