"""``crawlfleet export warc|pages|items``: a crawl's pages and items out of its store and directory.

    crawlfleet export pages --format jsonl --out pages/            # crawl-out's pages: text and links
    crawlfleet export pages --store hbase://127.0.0.1:9090/crawl --format parquet --out s3://bucket/pages
    crawlfleet export items --format parquet --out items.parquet/  # the plugins' items, one format
    crawlfleet export warc --out warc/
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pipeline.storage.cli import DEFAULT_STORE, _positive, _store_spec, export_warc


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    export = subparsers.add_parser("export", help="export a crawl's pages (WARC, JSONL, Parquet) and items")
    kinds = export.add_subparsers(dest="export_kind", required=True)
    warc = kinds.add_parser("warc", help="write every stored page as WARC 1.1 request/response records")
    warc.add_argument("--out", required=True, help="output directory")
    warc.add_argument(
        "--store", default=DEFAULT_STORE, type=_store_spec, help=f"sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX (default {DEFAULT_STORE})"
    )
    warc.add_argument("--max-bytes", type=_positive, default=1 << 30, help="start a new file past this size")
    warc.add_argument("--prefix", default="crawlfleet", help="file name prefix")
    warc.add_argument("--no-gzip", action="store_true", help="write uncompressed .warc files")
    warc.add_argument("--verify", action="store_true", help="read the files back and check every digest")
    warc.set_defaults(func=export_warc)

    pages = kinds.add_parser("pages", help="write every stored page (URL, final URL, status, headers, text, "
                             "links) as JSONL or Parquet")  # fmt: skip
    pages.add_argument("--out", required=True, help="output directory or URI (file://, s3://, hdfs://)")
    pages.add_argument(
        "--store", default=DEFAULT_STORE, type=_store_spec, help=f"sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX (default {DEFAULT_STORE})"
    )
    pages.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", type=_format, help="file format (default jsonl)")
    pages.add_argument("--no-text", action="store_true", help="leave the text out")
    pages.add_argument("--no-links", action="store_true", help="leave the links out")
    pages.add_argument("--max-bytes", type=_positive, default=256 << 20, help="JSONL: start a new file past this size")
    pages.add_argument("--rows", type=_positive, default=10_000, help="Parquet: pages per file")
    pages.set_defaults(func=export_pages)

    items = kinds.add_parser("items", help="write the plugins' items of a crawl as JSONL or Parquet")
    items.add_argument("--out", required=True, help="output directory or URI")
    items.add_argument("--crawl", default="crawl-out", help="crawl directory or item root URI (default crawl-out)")
    items.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", type=_format, help="file format (default jsonl)")
    items.add_argument("--type", default=None, help="only items of this type")
    items.set_defaults(func=export_items)


def _format(text: str) -> str:
    """An argparse ``type=`` for ``--format``: parquet needs pyarrow (the ``parquet`` extra)."""
    from pipeline.settings import parquet_available

    if text == "parquet" and not parquet_available():
        raise argparse.ArgumentTypeError("parquet needs pyarrow: pip install 'crawlfleet[parquet]'")
    return text


def export_pages(args: argparse.Namespace) -> int:
    from pipeline.export.pages import FIELDS, iter_pages
    from pipeline.export.writers import for_parquet, pages_schema, write_records
    from pipeline.storage.factory import from_spec

    store = from_spec(args.store)
    try:
        records: Any = iter_pages(store, text=not args.no_text, links=not args.no_links)
        if args.format == "parquet":
            records = (for_parquet({**dict.fromkeys(FIELDS), "text": None, "links": None, **r}) for r in records)
        written = write_records(records, args.out, fmt=args.format, prefix="pages", schema=pages_schema() if
                                args.format == "parquet" else None, max_bytes=args.max_bytes, rows_per_file=args.rows)  # fmt: skip
    finally:
        store.close()
    print(json.dumps({"pages": written.records, "files": written.files}, indent=2))
    return 0


def export_items(args: argparse.Namespace) -> int:
    from pipeline.export.items import iter_items
    from pipeline.export.writers import write_records

    records: Any = iter_items(args.crawl, type=args.type)
    if args.format == "parquet":
        from pipeline.storage.itemfiles import filesystem, parquet_bytes, write_whole

        lines = [json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records]
        fs, base = filesystem(args.out)
        path = f"{base}/items-00000.parquet"
        write_whole(fs, path, parquet_bytes(lines))
        print(json.dumps({"items": len(lines), "files": [path]}, indent=2))
        return 0
    written = write_records(records, args.out, fmt="jsonl", prefix="items")
    print(json.dumps({"items": written.records, "files": written.files}, indent=2))
    return 0
