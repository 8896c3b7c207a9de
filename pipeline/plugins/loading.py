"""Plugins from specs and entry points, checked once at start-up.

A spec is ``package.module:Name`` (``Name`` may be dotted: ``Outer.Inner``), or the name of an entry point
of the ``crawlfleet.plugins`` group (``importlib.metadata``): a package declares one in its pyproject::

    [project.entry-points."crawlfleet.plugins"]
    products = "shopdata.plugins:Products"

What a spec names is a class (instantiated without arguments) or an object; either must have one of the
methods of ``pipeline.plugins.api``. Every mistake (a module that does not import, a missing name, a
broken entry point, a constructor that raises, an object with no plugin method, a bad ``url_pattern``) is
one ``PluginError`` line naming the spec; the commands print it and exit 2 before anything is created.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

from pipeline.plugins.api import HTML_TYPES
from pipeline.plugins.chain import BoundExtractor, PluginSet
from pipeline.settings import Settings

GROUP = "crawlfleet.plugins"
_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class PluginError(ValueError):
    """A plugin that cannot be used; the message is one line naming it."""


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def resolve(spec: str) -> tuple[str, Any]:
    """``(where, object)`` for one spec (a class instantiated), or PluginError."""
    spec = spec.strip()
    if ":" in spec:
        if not _SPEC.match(spec):
            raise PluginError(f"plugin {spec!r}: expected package.module:Name or an entry point name")
        module_name, _, attr = spec.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
        except Exception as exc:  # any import-time failure of the user's module
            raise PluginError(f"plugin {spec!r}: cannot import {module_name} ({_short(exc)})") from None
        for part in attr.split("."):
            if not hasattr(target, part):
                raise PluginError(f"plugin {spec!r}: {module_name} has no attribute {attr!r}")
            target = getattr(target, part)
        return spec, _instance(spec, target)
    if not _NAME.match(spec):
        raise PluginError(f"plugin {spec!r}: expected package.module:Name or an entry point name")
    found = [ep for ep in metadata.entry_points(group=GROUP) if ep.name == spec]
    if not found:
        names = sorted({ep.name for ep in metadata.entry_points(group=GROUP)})
        have = f"installed: {', '.join(names)}" if names else "none is installed"
        raise PluginError(f"plugin {spec!r}: no entry point {spec!r} in group {GROUP} ({have})")
    return _from_entry_point(found[0])


def _from_entry_point(ep: metadata.EntryPoint) -> tuple[str, Any]:
    try:
        target = ep.load()
    except Exception as exc:
        raise PluginError(f"plugin {ep.name!r}: entry point {ep.name} = {ep.value} cannot be loaded "
                          f"({_short(exc)})") from None  # fmt: skip
    return ep.value, _instance(ep.name, target)


def _instance(spec: str, target: Any) -> Any:
    if isinstance(target, type):
        try:
            return target()
        except Exception as exc:
            raise PluginError(f"plugin {spec!r}: {target.__name__}() raised {_short(exc)}") from None
    return target


def entry_point_specs() -> list[str]:
    """Every plugin of the ``crawlfleet.plugins`` group, as the ``module:Name`` it points at."""
    return [ep.value for ep in metadata.entry_points(group=GROUP)]


def job_specs(settings: Settings) -> list[str]:
    """The crawl's plugins as ``module:Name`` specs a link-job task can import without the entry-point
    metadata of this machine (entry point names resolved to what they point at); PluginError as ``load``."""
    ps = settings.plugins
    out: list[str] = []
    for spec in ps.enabled:
        if ":" in spec:
            out.append(spec.strip())
            continue
        resolve(spec)  # the one-line error for a missing or broken entry point
        out += [ep.value for ep in metadata.entry_points(group=GROUP) if ep.name == spec.strip()][:1]
    if ps.entry_points:
        out += [s for s in entry_point_specs() if s not in out]
    return out


def build(objects: Iterable[tuple[str, Any]], *, specs: Sequence[str] = (), item_max_bytes: int) -> PluginSet | None:
    """A PluginSet of ``(where, object)`` pairs; None when there are none."""
    extractors: list[BoundExtractor] = []
    filters: list[tuple[str, Any]] = []
    pipelines: list[tuple[str, Any]] = []
    count = 0
    for where, obj in objects:
        count += 1
        name = str(getattr(obj, "name", "") or getattr(type(obj), "__name__", "plugin"))
        roles = 0
        if callable(getattr(obj, "extract", None)):
            extractors.append(_bound(where, name, obj))
            roles += 1
        if callable(getattr(obj, "filter_url", None)):
            filters.append((name, obj))
            roles += 1
        if callable(getattr(obj, "process_item", None)):
            pipelines.append((name, obj))
            roles += 1
        if not roles:
            raise PluginError(f"plugin {where!r}: {name} has none of extract(page), filter_url(url, source), "
                              "process_item(item, page)")  # fmt: skip
    if not count:
        return None
    return PluginSet(tuple(extractors), tuple(filters), tuple(pipelines), specs=tuple(specs),
                     item_max_bytes=item_max_bytes)  # fmt: skip


def _bound(where: str, name: str, obj: Any) -> BoundExtractor:
    pattern = getattr(obj, "url_pattern", None)
    compiled = None
    if pattern:
        if not isinstance(pattern, str):
            raise PluginError(f"plugin {where!r}: url_pattern must be a string, got {type(pattern).__name__}")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise PluginError(f"plugin {where!r}: url_pattern {pattern!r} is not a regular expression ({exc})") from None
    types = getattr(obj, "content_types", None) or HTML_TYPES
    if isinstance(types, str) or not all(isinstance(t, str) for t in types):
        raise PluginError(f"plugin {where!r}: content_types must be a list of strings like 'text/html'")
    return BoundExtractor(name, obj, compiled, tuple(t.strip().lower() for t in types))


def load(settings: Settings, *, objects: Sequence[Any] = ()) -> PluginSet | None:
    """The crawl's plugins: ``plugins.enabled`` specs, the entry-point group when ``plugins.entry_points``,
    then ``objects`` (the Python API's). None when there are none: the crawl then runs without this room.
    PluginError (one line) for the first that cannot be used."""
    ps = settings.plugins
    specs = list(ps.enabled)
    pairs = [resolve(spec) for spec in specs]
    if ps.entry_points:
        for ep in metadata.entry_points(group=GROUP):
            if ep.value not in specs and ep.name not in specs:
                pairs.append(_from_entry_point(ep))
                specs.append(ep.value)
    pairs += [(f"{type(obj).__module__}.{type(obj).__qualname__}", obj) for obj in objects]
    return build(pairs, specs=specs, item_max_bytes=ps.item_max_bytes)
