"""Extraction plugins and the items they yield: which plugins run, and where and how items are written.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``. The plugin API
itself is ``pipeline.plugins`` (docs/PLUGINS.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PluginSettings:
    # Plugins to run, each "package.module:Name" (a class, instantiated without arguments, or an object) or
    # the name of an entry point of the "crawlfleet.plugins" group. `--plugin SPEC` adds one (repeatable).
    enabled: tuple[str, ...] = ()
    # Also run every plugin installed under the "crawlfleet.plugins" entry-point group.
    entry_points: bool = False
    # Item files: "jsonl" (rotated files), "parquet" (each closed JSONL file becomes one Parquet file) or
    # "both".
    items_format: str = "jsonl"
    # Where items go: "" = the crawl directory's items/ (embedded) or OUT/items (fleet); the fleet also
    # takes a URI (file://, hdfs://, s3://: what fsspec opens where the link jobs run).
    items_root: str = ""
    # A JSONL item file is closed (and a new one opened) past this many bytes.
    items_file_bytes: int = 64 * 1024 * 1024
    # One item's JSON past this many bytes is refused with a per-item error (the page's other items stay).
    item_max_bytes: int = 1024 * 1024
