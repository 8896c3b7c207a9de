"""``crawlfleet export warc``'s work: every stored page as WARC (``pipeline.export.cli`` registers the command)."""

from __future__ import annotations

import argparse
import json

from pipeline.storage.factory import DEFAULT_CRAWL_DIR, from_spec, sqlite_path
from pipeline.storage.warc import WarcWriter

DEFAULT_STORE = f"sqlite:{DEFAULT_CRAWL_DIR}/"  # the crawl db of `crawlfleet crawl`'s default --out


def _store_spec(text: str) -> str:
    """An argparse ``type=``: a store spec; a SQLite one must name a crawl db that exists (export reads it)."""
    if text.startswith("sqlite:"):
        path = sqlite_path(text.removeprefix("sqlite:"))
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"expected an existing crawl db, got {text!r} ({path} does not exist)")
    elif not (text == "hbase" or text.startswith("hbase://")):
        raise argparse.ArgumentTypeError(f"expected sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX, got {text!r}")
    return text


def _positive(text: str) -> int:
    if not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return int(text)


def export_warc(args: argparse.Namespace) -> int:
    store = from_spec(args.store)
    try:
        with WarcWriter(args.out, max_bytes=args.max_bytes, prefix=args.prefix, gzip=not args.no_gzip) as writer:
            stats = writer.write_pages(store.iter_pages())
    finally:
        store.close()
    result: dict[str, object] = {
        "pages": stats.pages, "records": stats.records, "files": [str(p) for p in stats.files],
    }  # fmt: skip
    if args.verify:
        problems = verify(stats.files)
        result["verified"] = not problems
        result["problems"] = problems
    print(json.dumps(result, indent=2))
    return 0 if not result.get("problems") else 1


def verify(files: list) -> list[str]:  # type: ignore[type-arg]
    """Read every record back with digest checks; return the problems found (empty when valid)."""
    from warcio.archiveiterator import ArchiveIterator

    problems: list[str] = []
    for path in files:
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh, check_digests=True):
                record.content_stream().read()
                if record.digest_checker.passed is False:
                    problems += [f"{path}: {p}" for p in record.digest_checker.problems]
    return problems
