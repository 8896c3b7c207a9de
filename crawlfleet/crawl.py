"""``Crawl``: the embedded crawl from Python, with plugins and a callback per page.

    crawl = Crawl({"scope": {"max_pages": 100}}, ["https://example.org/"], plugins=[MyPlugin()], out="out")
    summary = crawl.run(on_page=print)                    # blocking
    summary = await crawl.arun(on_page=handle)            # inside an event loop

It is ``crawlfleet crawl`` without the command line: the same checks (seeds, the crawl directory, the
plugins: a ``ValueError`` naming the bad one, before anything is created), the same crawl directory
(crawl db, segments, items/, summary.json, crawl-settings.json, so ``crawlfleet crawl --resume`` and
``crawlfleet export`` work on it too), and the same guarantees. Plugins may be objects or specs
(``"package.module:Name"``). An object a parse process cannot unpickle (its class defined in ``__main__`` or
in a function) runs in the crawl's own process, pages and all: put plugins in a module of their own for speed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.settings import Settings, load_settings

log = logging.getLogger("crawlfleet")


@dataclass(frozen=True, slots=True)
class PageResult:
    """One fetched URL as the callback sees it: its final outcome and its page's items (this run's)."""

    url: str
    final_url: str
    status: int  # 0: no HTTP answer (see error)
    fetched_at: float
    error: str = ""  # "" or "ERROR_CLASS: message"
    content_type: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)  # item lines as dicts (pipeline.plugins.records)


def _settings(settings: Settings | Mapping[str, Mapping[str, Any]] | str | Path | None) -> Settings:
    if isinstance(settings, Settings):
        return settings
    if settings is None:
        return load_settings(environ={})
    if isinstance(settings, str | Path):
        return load_settings(settings, environ={})
    return load_settings(environ={}, overrides=settings)


class Crawl:
    """One crawl directory's crawl (see the module docstring).

    ``settings``: a ``Settings``, a mapping of sections (``{"scope": {"max_pages": 100}}``) or a TOML file
    path; the environment is not read. ``seeds``: http(s) URLs. ``plugins``: objects or specs, after
    ``plugins.enabled`` of the settings. ``out``: the crawl directory; ``resume``: go on with the crawl in
    it (it must hold one), else it must not hold one."""

    def __init__(
        self,
        settings: Settings | Mapping[str, Mapping[str, Any]] | str | Path | None = None,
        seeds: Sequence[str] = (),
        *,
        plugins: Sequence[object | str] = (),
        out: str | Path = "crawl-out",
        resume: bool = False,
        fetcher: str = "h1",  # fetchers.choice.DEFAULT
    ) -> None:
        from pipeline.embedded.start import read_seeds
        from pipeline.plugins.loading import load

        base = _settings(settings)
        specs = tuple(p for p in plugins if isinstance(p, str))
        if specs:
            enabled = base.plugins.enabled + tuple(s for s in specs if s not in base.plugins.enabled)
            base = dataclasses.replace(base, plugins=dataclasses.replace(base.plugins, enabled=enabled))
        self.settings = base
        self.seeds = read_seeds(list(seeds), None)
        self.out = Path(out)
        self.resume, self.fetcher = resume, fetcher
        if not self.seeds and not resume:
            raise ValueError("give at least one seed URL (or resume=True to go on with the crawl in out)")
        holds = (self.out / "crawl.db").exists()
        if holds and not resume:
            raise ValueError(f"{self.out} holds a crawl already (a new directory, or resume=True to go on)")
        self.plugins = load(base, objects=[p for p in plugins if not isinstance(p, str)])

    def run(self, on_page: Callable[[PageResult], None] | None = None) -> dict[str, Any]:
        """Crawl to the end (or ``scope.max_pages``) and return the summary; ``on_page`` sees every fetched
        URL's final outcome, on the crawl's thread, as it is applied (keep it quick)."""
        return asyncio.run(self.arun(on_page))

    async def arun(self, on_page: Callable[[PageResult], None] | None = None) -> dict[str, Any]:
        """``run`` in the running event loop (the crawl shares it: ``on_page`` must not block)."""
        from pipeline.crawl import remember
        from pipeline.embedded.engine import CrawlRequest, EmbeddedCrawl

        self.out.mkdir(parents=True, exist_ok=True)
        memory = remember.load(self.out) if self.resume else None
        remember.save(self.out, self.settings, self.seeds + (memory.seeds if memory else []))
        crawl = EmbeddedCrawl(self.settings, CrawlRequest(self.seeds, self.out, resume=self.resume,
                                                          fetcher=self.fetcher),
                              plugins=self.plugins, on_result=_adapter(on_page) if on_page else None)  # fmt: skip
        return await crawl.run()


def _adapter(on_page: Callable[[PageResult], None]) -> Callable[[Any], None]:
    from pipeline.crawl.outcome import is_final

    def deliver(res: Any) -> None:
        if not is_final(res):
            return  # tried again later: the callback sees its final outcome
        plugged = res.prepared.plugged if res.prepared is not None else None
        raw = plugged.items if plugged is not None else b""
        items = [json.loads(line) for line in raw.splitlines() if line]
        error = f"{res.error_class}: {res.error_message}" if res.error_class else ""
        on_page(PageResult(res.url, res.final_url or res.url, res.status, res.fetched_at, error, res.content_type, items))

    return deliver
