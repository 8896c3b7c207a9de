"""The plugins' code, packed for the fleet's extract job: one zip for mrjob's ``--py-files``.

The extract job runs where its runner puts it (a local task, a Spark executor, a Hadoop or EMR node), and
its tasks import the plugins by their specs (job arguments). Their code travels with the job: ``pack``
zips the top-level package (or module) each spec's module lives in, found from this process's import path,
and mrjob puts the zip on every task's ``PYTHONPATH`` (the inline runner imports in the driver's own
process, where the plugins are importable already). The crawler's own packages are not packed: the tasks
run the installed crawlfleet.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

PROJECT = frozenset({"pipeline", "jobs", "fetchers", "crawlfleet"})


def _sources(top: str) -> Iterator[tuple[Path, str]]:
    """(file, name in the zip) of the top-level package or module ``top``."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise ModuleNotFoundError(f"plugin package {top!r} is not importable here")
    if spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            root = Path(location)
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                    yield path, f"{top}/{path.relative_to(root)}"
    elif spec.origin and spec.origin.endswith(".py"):
        yield Path(spec.origin), f"{top}.py"
    else:
        raise ModuleNotFoundError(f"plugin module {top!r} is not pure Python (ship it installed on the nodes)")


def pack(specs: Sequence[str], directory: Path) -> Path | None:
    """A zip of the plugins' code in ``directory`` (named by its content, so an unchanged set is packed once);
    None when every spec is the crawler's own (nothing to ship)."""
    tops = sorted({s.partition(":")[0].split(".")[0] for s in specs} - PROJECT)
    if not tops:
        return None
    files = [src for top in tops for src in _sources(top)]
    digest = hashlib.sha1()
    for path, name in files:
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    target = directory / f"plugins-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, name in files:
            zf.write(path, name)
    os.replace(tmp, target)
    return target
