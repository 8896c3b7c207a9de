"""Where a batch's pages go, as the task message names it: the crawl's store and segments URI, and WARC.

The dispatcher names its own (``crawl_sink``); a node may override either with its own settings
(``SinkSpec.overridden``: a different mount point, the HBase address as seen from that machine). What a
node then does with them is ``pipeline.transport.node.sink``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.settings import Settings
from pipeline.storage import uris
from pipeline.storage.factory import DB_NAME


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """Where a batch's pages go: a store spec (``sqlite:PATH`` or ``hbase://HOST:PORT/PREFIX``), the
    segments' root URI (``pipeline.storage.uris``), and a WARC directory ("" = no WARC)."""

    store: str
    segments: str
    warc: str = ""
    keep_body: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "segments": self.segments,
            "warc": self.warc,
            "keep_body": self.keep_body,
        }

    @classmethod
    def from_json(cls, obj: Any) -> SinkSpec | None:
        """The spec, or None for None; ValueError on anything but what ``to_json`` makes."""
        if obj is None:
            return None
        if not isinstance(obj, dict) or set(obj) != {"store", "segments", "warc", "keep_body"}:
            raise ValueError("sink must be {store, segments, warc, keep_body}")
        store, segments, warc, keep = obj["store"], obj["segments"], obj["warc"], obj["keep_body"]
        if not all(isinstance(x, str) for x in (store, segments, warc)) or not isinstance(keep, bool):
            raise ValueError("sink store/segments/warc must be strings, keep_body a boolean")
        if not (store.startswith("sqlite:/") or store == "hbase" or store.startswith("hbase://")):
            raise ValueError(
                f"sink store {store[:80]!r}: expected sqlite:/ABS/PATH or hbase://HOST:PORT/PREFIX"
            )
        if warc and (not warc.startswith("/") or "\x00" in warc or "/../" in f"{warc}/"):
            raise ValueError(f"sink path {warc[:80]!r} must be absolute, without '..'")
        if not segments:
            raise ValueError("sink segments directory is required")
        uris.check(segments)
        return cls(store, segments, warc, keep)

    def overridden(self, *, store: str = "", segments: str = "") -> SinkSpec:
        """This spec with a node's own settings in place of the dispatcher's, where it has them."""
        return SinkSpec(store or self.store, segments or self.segments, self.warc, self.keep_body)


def crawl_sink(settings: Settings, out_dir: Path) -> SinkSpec:
    """The sink of the crawl in ``out_dir``, as its dispatcher names it to nodes and the link jobs find it:
    the crawl's store, ``fleet.segments_dir`` (a URI; default the directory OUT/node-segments) and OUT/warc
    when WARC is on."""
    out = out_dir.resolve()
    st = settings.store
    if st.kind == "hbase":
        store = f"hbase://{st.hbase_host}:{st.hbase_port}/{st.hbase_prefix}"
    else:
        store = f"sqlite:{out / DB_NAME}"  # the dispatcher's own path (its directory may not exist yet)
    segments = settings.fleet.segments_dir or str(out / "node-segments")
    if uris.is_local(segments):
        segments = str(Path(segments.removeprefix("file://")).resolve())
    warc = str(out / "warc") if st.warc else ""
    return SinkSpec(store, segments, warc, settings.fetch.keep_body)
