"""``crawlfleet duplicates``: which stored URLs share content (issue #23 point 3), from the store.

Reads every stored page once (``Store.iter_pages``: the SQLite store of an embedded or fleet crawl, or HBase)
and groups the URLs whose bodies are the same (exact: ``pipeline.links.change.content_digest``) or, with
``--near-bits K``, whose visible text's simhash is within K bits (near duplicates: the same article under a
different date line or advert). Only pages with a 2xx status and a body count; a near group lists the URLs
that are near but not all byte-identical. Uses the change-detection functions the re-crawl uses, so a
near-duplicate here is what a re-fetch would call unchanged with ``recrawl.simhash_bits = K``.

Usage: ``crawlfleet duplicates CRAWL_DIR`` (its ``crawl.db``) or ``--store hbase://HOST:PORT/PREFIX``;
``--json`` prints the whole result as one JSON object, otherwise one line per group; ``--write`` also puts it in
``CRAWL_DIR/duplicates.json``, which ``crawlfleet report`` then shows as its "Duplicate content" section.
Cost: one pass over the pages (a parse of each body for its text when near groups are asked for) and
``duplicate_groups``'s bucketed comparison; memory: one fingerprint per page.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.links.change import Fingerprint, content_digest, duplicate_groups, fingerprint
from pipeline.storage.base import PageRecord, Store

DUPLICATES_FILE = "duplicates.json"  # pipeline.report.data reads it (the report room cannot import jobs)
MAX_GROUPS = 1000  # groups listed (largest first); the totals count them all


@dataclass(frozen=True, slots=True)
class DuplicateReport:
    pages: int  # 2xx pages with a body that were compared
    near_bits: int
    exact: list[list[str]]  # groups of byte-identical pages, largest first
    near: list[list[str]]  # groups of near-duplicates that are not all byte-identical (near_bits > 0)

    def to_json(self, *, max_groups: int = MAX_GROUPS) -> dict[str, Any]:
        return {
            "pages": self.pages,
            "near_bits": self.near_bits,
            "exact_groups": len(self.exact),
            "exact_urls": sum(len(g) for g in self.exact),
            "near_groups": len(self.near),
            "near_urls": sum(len(g) for g in self.near),
            "exact": self.exact[:max_groups],
            "near": self.near[:max_groups],
        }


def _prints(pages: Iterable[PageRecord], *, near: bool) -> Iterable[tuple[str, Fingerprint]]:
    for p in pages:
        if not 200 <= p.status < 300 or not p.body:
            continue
        if near:
            yield p.url, fingerprint(p.body, p.content_type)
        else:
            yield p.url, Fingerprint(content_digest(p.body), 0, 0)


def duplicate_report(pages: Iterable[PageRecord], *, near_bits: int = 0) -> DuplicateReport:
    """Exact and near-duplicate groups among ``pages`` (each group sorted; groups largest first)."""
    items = list(_prints(pages, near=near_bits > 0))
    exact = duplicate_groups(items, near_bits=0)
    near: list[list[str]] = []
    if near_bits:
        same = {url: i for i, group in enumerate(exact) for url in group}
        for group in duplicate_groups(items, near_bits=near_bits):
            if len({same.get(u, u) for u in group}) > 1:  # not one byte-identical set
                near.append(group)
    order = lambda g: (-len(g), g[0])  # noqa: E731 - the one sort key of both lists
    return DuplicateReport(len(items), near_bits, sorted(exact, key=order), sorted(near, key=order))


def store_report(store: Store, *, near_bits: int = 0) -> DuplicateReport:
    return duplicate_report(store.iter_pages(), near_bits=near_bits)


# --- the sub-command --------------------------------------------------------------------------------------------
def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "duplicates", help="which stored URLs share content (exact digest, near: simhash)"
    )
    p.add_argument("crawl_dir", nargs="?", type=Path, default=None, metavar="CRAWL_DIR",
                   help="a crawl's --out directory (its crawl.db)")  # fmt: skip
    p.add_argument("--store", default=None, metavar="SPEC",
                   help="the store instead: sqlite:PATH, hbase or hbase://HOST:PORT/PREFIX")  # fmt: skip
    p.add_argument("--near-bits", type=_bits, default=3,
                   help="also group pages whose text simhash is within this many bits (0: exact only; default 3)")  # fmt: skip
    p.add_argument("--max-groups", type=int, default=MAX_GROUPS, help="groups listed (largest first)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--write", action="store_true",
                   help="also write CRAWL_DIR/duplicates.json, which `crawlfleet report` shows as a section")  # fmt: skip
    p.set_defaults(func=_cmd)


def _bits(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n < 64:
        raise argparse.ArgumentTypeError(f"expected a number of bits in 0..63, got {text!r}")
    return n


def _cmd(args: argparse.Namespace) -> int:
    from pipeline.storage.factory import from_spec

    if (args.crawl_dir is None) == (args.store is None):
        print("crawlfleet duplicates: give CRAWL_DIR or --store SPEC (one of them)", file=sys.stderr)
        return 2
    spec = args.store or f"sqlite:{args.crawl_dir}"
    if args.write and args.crawl_dir is None:
        print("crawlfleet duplicates: --write needs CRAWL_DIR (the file goes there)", file=sys.stderr)
        return 2
    if args.crawl_dir is not None and not (args.crawl_dir / "crawl.db").is_file():
        print(f"crawlfleet duplicates: no crawl.db in {args.crawl_dir}", file=sys.stderr)
        return 2
    try:
        store = from_spec(spec)
    except ValueError as exc:
        print(f"crawlfleet duplicates: {exc}", file=sys.stderr)
        return 2
    try:
        report = store_report(store, near_bits=args.near_bits)
    finally:
        store.close()
    data = report.to_json(max_groups=args.max_groups)
    if args.write:
        (args.crawl_dir / DUPLICATES_FILE).write_text(
            json.dumps(data, sort_keys=True) + "\n", encoding="utf-8"
        )
    if args.json:
        print(json.dumps(data, sort_keys=True))
        return 0
    print(f"{data['pages']} pages; {data['exact_groups']} exact groups ({data['exact_urls']} URLs), "
          f"{data['near_groups']} near groups ({data['near_urls']} URLs, within {args.near_bits} bits)")  # fmt: skip
    for kind in ("exact", "near"):
        for group in data[kind]:
            print(f"{kind} {len(group)}: {' '.join(group)}")
    return 0
