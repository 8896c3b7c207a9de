"""``crawlfleet crawl`` before the crawl: check every input, then settle the settings of this run.

Order, so that a mistake leaves nothing behind: seeds, ``--out`` and settings are checked first (a
``UsageError`` names the bad value); only then is anything created. On ``--resume`` the crawl
directory's remembered settings (``pipeline.crawl.remember``) are the layer under file, environment
and flags; each override is logged on one line. ``--max-pages`` is a total over every run of the crawl.
A crawl whose hosts cannot be resolved (or only to addresses the guard refuses) does not start
(``pipeline.embedded.preflight``): its URLs stay pending.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.crawl import remember
from pipeline.crawl.flags import check_stop_file, loaded_from_args, plugins_of
from pipeline.crawl.pageitems import items_dir
from pipeline.observe.errors import UsageError
from pipeline.plugins.chain import PluginSet
from pipeline.settings import Settings
from pipeline.storage.base import settled as settled_in
from pipeline.urls import host_of, normalize

log = logging.getLogger("pipeline.embedded.start")
SHOWN = 3  # bad seeds-file lines named in the warning


@dataclass(frozen=True, slots=True)
class Plan:
    """What to run: ``settings`` for this run (its ``max_pages`` is what is left of the total), or
    ``stop``: a reason not to run and the exit code that goes with it."""

    settings: Settings
    seeds: list[str]
    stop: str = ""
    exit_code: int = 0
    plugins: PluginSet | None = None


def read_seeds(cli_seeds: list[str], seeds_file: str | None, *, err: Any = None) -> list[str]:
    """Seeds from the command line (each must be an http(s) URL) and the seeds file (blank lines and
    ``#`` comments skipped; other lines that are not URLs are reported on one line and left out)."""
    for seed in cli_seeds:
        if not normalize(seed):
            raise UsageError(f"seed {seed!r} is not an http(s) URL (expected e.g. https://example.com/)")
    seeds = list(cli_seeds)
    if seeds_file:
        try:
            lines = Path(seeds_file).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise UsageError(f"--seeds-file {seeds_file}: {exc.strerror or exc} (expected a file of URLs)") from None
        bad = []
        for n, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            if normalize(text):
                seeds.append(text)
            else:
                bad.append(f"line {n}: {text[:80]!r}")
        if bad:
            more = f", and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
            what = f"{len(bad)} lines are not http(s) URLs ({', '.join(bad[:SHOWN])}{more})"
            if not seeds:
                raise UsageError(f"--seeds-file {seeds_file}: no seed URL in it; {what}")
            print(f"crawl: --seeds-file {seeds_file}: {what}; left out", file=err or sys.stderr)
    return seeds


def _check_out(out: Path, *, resume: bool, sqlite: bool, has_seeds: bool) -> bool:
    """Whether ``out`` holds a crawl; raises UsageError when ``out`` cannot be the crawl asked for."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file (expected a crawl directory)")
    holds = (out / "crawl.db").exists() or (out / remember.FILE).exists()
    if not resume and holds:
        raise UsageError(f"--out {out}: holds a crawl already (expected a new directory, or --resume to go on)")
    if resume and not holds and sqlite and not has_seeds:
        raise UsageError(f"--resume: {out} holds no crawl (no crawl.db); give seed URLs to start one there")
    return holds


def _counts(settings: Settings, out: Path) -> tuple[dict[str, int], list[str]]:
    """The crawl db's URL counts per state; the seeds' hosts (they resolved when the crawl began, so
    one that resolves now shows DNS works), then some hosts with pending URLs."""
    from pipeline.storage.factory import from_settings as open_store

    store = open_store(settings.store, out / "crawl.db")
    try:
        seeds = json.loads(store.get_meta("seeds") or "[]")
        hosts = [host_of(u) for u in seeds[:4]] + [h for h, _ in store.pending_hosts(limit=8)]
        store.reconcile_counts()  # exact before --max-pages uses them (HBase's may drift in faults)
        return store.counts(), hosts
    finally:
        store.close()


def _check_quotas(path: str) -> None:
    """A quota file that cannot be read is the user's mistake, named before anything is created."""
    from pipeline.dispatch.quotas import QuotaError, Quotas

    try:
        Quotas.from_settings_file(path)
    except (OSError, QuotaError) as exc:
        raise UsageError(f"dispatch.quotas_file: {exc}") from exc


def plan(args: argparse.Namespace) -> Plan:
    """Check the inputs of ``crawlfleet crawl`` and decide what this run does (see the module docstring)."""
    seeds = read_seeds(list(args.seeds), args.seeds_file)
    out = Path(args.out)
    if not seeds and not args.resume:
        raise UsageError("give at least one seed URL (or --resume to continue the crawl in --out)")
    memory = remember.load(out) if args.resume and out.is_dir() else None
    loaded = loaded_from_args(args, remembered=memory.settings if memory else None)
    settings = loaded.settings
    _check_quotas(settings.dispatch.quotas_file)
    check_stop_file(args, settings)
    plugins = plugins_of(settings)
    try:
        items_dir(settings, out)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    holds = _check_out(out, resume=args.resume, sqlite=settings.store.kind == "sqlite", has_seeds=bool(seeds))
    for override in remember.overrides(memory.settings, loaded) if memory else []:
        log.info(override.line())
    if args.resume and holds and memory is None:
        log.warning("resume: %s remembers no settings (a crawl from before %s); using the flags given", out, remember.FILE)
    hosts = [host_of(u) for u in (normalize(s) for s in seeds) if u]
    total = settings.scope.max_pages
    if args.resume and holds:
        counts, pending_hosts = _counts(settings, out)
        settled = settled_in(counts)
        if total and settled >= total:
            return Plan(settings, seeds, f"crawl: {out} has settled {settled} URLs, --max-pages is {total} in all; "
                        "raise --max-pages to go on")  # fmt: skip
        # A re-crawl is never done: its fetched URLs come due again (the run requeues those due now, and
        # a continuous one waits for the rest), so only a crawl without one can have nothing left.
        if not counts.get("pending", 0) and not seeds and not (settings.recrawl.on or args.continuous):
            return Plan(settings, seeds, f"crawl: {out} has nothing left to crawl ({settled} URLs settled); "
                        "give new seed URLs to go on")  # fmt: skip
        hosts = hosts + pending_hosts
        if total:
            settings = dataclasses.replace(settings, scope=dataclasses.replace(settings.scope, max_pages=total - settled))
    from pipeline.embedded import preflight

    problem = preflight.check(settings, hosts)
    if problem is not None:
        return Plan(settings, seeds, f"crawl: not started, {problem}; nothing was changed in {out}", exit_code=1)
    out.mkdir(parents=True, exist_ok=True)
    remember.save(out, loaded.settings, seeds + (memory.seeds if memory else []))
    return Plan(settings, seeds, plugins=plugins)
