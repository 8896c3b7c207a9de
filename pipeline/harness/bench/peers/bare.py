"""The bare peer of ``crawlfleet bench peers``: ``bench local``'s aiohttp + lexbor loop over a fixed URL list
(the truth's pages), ``--per-host`` connections per host, names from the testbed's model, no robots, no
frontier, no store: the ceiling. Run as its own process so that its CPU is its own.

    python -m pipeline.harness.bench.peers.bare --urls FILE --hosts H --per-host N [--ca PEM]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl

from pipeline.harness.bench.local import bare_loop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bare")
    p.add_argument("--urls", required=True)
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--per-host", type=int, default=4)
    p.add_argument("--ca", default="", help="trust this CA (PEM) for https")
    args = p.parse_args(argv)
    with open(args.urls) as fh:
        urls = [line.strip() for line in fh if line.strip()]
    ctx: ssl.SSLContext | bool = ssl.create_default_context(cafile=args.ca) if args.ca else True
    out = asyncio.run(bare_loop(urls, args.hosts, per_host=args.per_host, ssl=ctx))
    print(json.dumps({k: round(v, 3) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
