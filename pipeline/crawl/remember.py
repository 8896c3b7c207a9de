"""A crawl directory remembers its settings: ``OUT/crawl-settings.json``, written at the first start.

``crawl --resume --out DIR`` (and the dispatcher's ``--resume``) take the remembered values as the layer
above the defaults; a settings file, environment variable or flag given at resume overrides them, and
each override is logged on one line (``overrides``) and remembered from then on.

Remembered: every section but ``fleet`` (the broker URL may hold a password, and where the broker runs
is a deployment's business, not the crawl's), and the seeds. The file is replaced atomically (a
temporary file, fsync, rename), so a crash leaves the old or the new version, never half of one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.settings import Loaded, Settings, SettingsError, sections

FILE = "crawl-settings.json"
VERSION = 1
NOT_REMEMBERED = frozenset({"fleet"})


@dataclass(frozen=True, slots=True)
class Remembered:
    settings: dict[str, dict[str, Any]]  # {section: {field: value}}, lists for tuples (as JSON has them)
    seeds: list[str]
    saved_at: float


@dataclass(frozen=True, slots=True)
class Override:
    key: str  # "section.field"
    remembered: Any
    value: Any
    source: str  # file:PATH, env:NAME or flag

    def line(self) -> str:
        return f"resume: {self.key} = {_show(self.value)} ({self.source}) overrides the crawl's remembered {_show(self.remembered)}"


def _show(value: Any) -> str:
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def as_dict(settings: Settings) -> dict[str, dict[str, Any]]:
    """The remembered sections of ``settings`` as ``{section: {field: value}}`` with lists for tuples."""
    return {
        s: {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(getattr(settings, s)).items()}
        for s in sections()
        if s not in NOT_REMEMBERED
    }


def load(out_dir: Path) -> Remembered | None:
    """The settings ``out_dir`` remembers, or None when it has none (a crawl from before this file existed)."""
    path = out_dir / FILE
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SettingsError(f"{path}: unreadable ({exc}); fix or remove it (expected the JSON this crawl wrote)") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("settings"), dict):
        raise SettingsError(f"{path}: expected an object with a 'settings' table, got something else")
    # A field this version does not know (written by another version) is left out, not an error.
    known = {s: {f.name for f in dataclasses.fields(cls)} for s, cls in sections().items() if s not in NOT_REMEMBERED}
    settings = {
        s: {k: v for k, v in values.items() if k in known[s]}
        for s, values in obj["settings"].items()
        if s in known and isinstance(values, dict)
    }
    return Remembered(settings, [str(u) for u in obj.get("seeds") or []], float(obj.get("saved_at") or 0.0))


def save(out_dir: Path, settings: Settings, seeds: Sequence[str], *, clock: Callable[[], float] = time.time) -> Path:
    """Write ``settings`` (the remembered sections) and ``seeds`` to ``out_dir/crawl-settings.json`` atomically."""
    path = out_dir / FILE
    body = {"version": VERSION, "saved_at": clock(), "seeds": sorted(set(seeds)), "settings": as_dict(settings)}
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(body, fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:  # the rename itself is durable once the directory is
        dir_fd = os.open(out_dir, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def overrides(remembered: Mapping[str, Mapping[str, Any]], loaded: Loaded) -> list[Override]:
    """The remembered values that a file, the environment or a flag replaced at resume with another value.
    Pure: a function of the remembered table and the loaded settings with their sources."""
    out = []
    current = as_dict(loaded.settings)
    for section, values in remembered.items():
        for name, old in values.items():
            key = f"{section}.{name}"
            source = loaded.sources.get(key, "default")
            new = current.get(section, {}).get(name)
            if source not in ("default", "crawl-dir") and _same(old) != _same(new):
                out.append(Override(key, old, new, source))
    return out


def _same(value: Any) -> Any:
    return list(value) if isinstance(value, list | tuple) else value
