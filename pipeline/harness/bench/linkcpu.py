"""The link path's CPU in ``crawlfleet bench fleet``: the link functions alone over the crawl's segments
(the "bare" figure), and the link-jobs service's CPU split by process.

``crawlfleet links`` runs its extract job in a worker process of its own (with the tasks it forks) and
merges each round's links into the crawl store from the service process (inline for a one-task merge; a
large round's merge forks tasks of its own). The split reads the tree's CPU (a cgroup's count, which holds
whatever the tree starts, reaped or not; on 2026-11-29 it agreed with the service's reaped-children times
within 0.2%, so the figures before it stand) and the service process's own, as last sampled before it
ended. The children's side (the extract worker and its tasks, plus a large round's merge tasks: in a
py-spy profile of a 50k crawl about a ninth of the children's samples were merge and HBase work) is set
against the bare functions; the service's own is polling, round leases and the inline merges.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

from pipeline.harness.bench.cputrace import CpuTrace
from pipeline.storage.segments import DONE_DIR, Segments


def done_infos(segs: Segments) -> list[dict[str, Any]]:
    """Listing entries of the merged segments kept under .done/."""
    out: list[dict[str, Any]] = []
    for node_dir in segs._ls(f"{segs.base}/{DONE_DIR}", dirs_only=True):
        out += segs._infos(node_dir)
    return out


def bare_links(segments: Iterable[Iterable[bytes]], rules: Any) -> tuple[int, int]:
    """The link functions in a plain loop, no mrjob: each segment's lines decoded, each page's candidates
    (``jobs.logic.page_candidates``) combined per target URL, and one record per URL merged from them,
    as the extract job's output. (pages, records). The "bare" of ``bench jobs`` and ``bench fleet`` alike."""
    from jobs import logic

    pages = 0
    combiner = logic.LinkCombiner(max_urls=1 << 62)
    for lines in segments:
        for line in lines:
            result = logic.decode_result(line)
            if result is not None:
                pages += 1
                for cand in logic.page_candidates(result, rules):
                    combiner.add(cand)
    return pages, len([logic.merge_link_values(url, [value]) for url, value in combiner.drain()])


def bare_cpu_ms_per_page(segs: Segments) -> float | None:
    """CPU per page of ``bare_links`` over the crawl's merged segments, reading them included (the job
    reads them too). Before 2026-11-30 this figure left out reading and decoding the segments (0.06 ms
    a page of 0.25 on the 50k web) and the merge of each URL's record, unlike ``bench jobs``' bare loop."""
    from jobs import logic

    rules = logic.LinkRules.build(allowed_domains=["crawl.test"], max_depth=64)
    infos = done_infos(segs)
    t0 = time.process_time()
    pages, _ = bare_links((segs.fs.cat_file(info["name"]).splitlines() for info in infos), rules)
    spent = time.process_time() - t0
    return round(1000 * spent / pages, 4) if pages else None


def own_at_end(trace: CpuTrace) -> float:
    """The traced process's own CPU seconds at ``trace``'s last sample (NaN when it has none)."""
    return trace.own[-1] if trace.own else float("nan")


def split(tree_cpu_s: float | None, service_cpu_s: float, pages: int, bare_ms: float | None) -> dict[str, Any]:
    """The service tree's CPU (``tree_cpu_s``; None when not counted) as its children's (every process but
    the service's own) and the service's own (``service_cpu_s``), per page, and the children's against
    ``bare_ms``."""
    if tree_cpu_s is None or math.isnan(tree_cpu_s) or math.isnan(service_cpu_s) or pages <= 0:
        return {"links_children_cpu_ms_per_page": None, "links_service_cpu_ms_per_page": None,
                "links_children_x_bare": None}  # fmt: skip
    children = 1000 * max(0.0, tree_cpu_s - service_cpu_s) / pages
    return {
        "links_children_cpu_ms_per_page": round(children, 4),
        "links_service_cpu_ms_per_page": round(1000 * service_cpu_s / pages, 4),
        "links_children_x_bare": round(children / bare_ms, 3) if bare_ms else None,
    }
