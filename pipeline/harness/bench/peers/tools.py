"""The peers' tools, made before a run and kept in a cache directory: the colly program built with ``go
build`` from ``colly/`` (modules from the Go module proxy, pinned by its go.sum), and Scrapy installed with
pip into a virtualenv of its own, as its users would run it. Both are remade only when their inputs change.

A missing tool is an error (``ToolError``, one line), never a skipped peer: the bench and its test must
fail where go or the package index cannot be reached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLLY_SRC = HERE / "colly"
SCRAPY_SPIDER = HERE / "scrapy_spider.py"
SCRAPY_VERSION = "2.19.0"
INSTALL_TIMEOUT_S = 900


class ToolError(RuntimeError):
    """A peer's tool could not be built or installed."""


def cache_dir() -> Path:
    """``$CRAWLFLEET_PEERS_CACHE``, else ``~/.cache/crawlfleet/peers``."""
    path = os.environ.get("CRAWLFLEET_PEERS_CACHE") or str(Path.home() / ".cache" / "crawlfleet" / "peers")
    return Path(path)


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def colly_binary(cache: Path | None = None) -> Path:
    """The colly peer, built by ``go build`` when its sources changed since the last build."""
    cache = cache or cache_dir()
    sources = [COLLY_SRC / n for n in ("main.go", "go.mod", "go.sum")]
    target = cache / f"colly-peer-{_digest(sources)}"
    if target.exists():
        return target
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        raise ToolError("go not found on PATH (the colly peer is built with go build)")
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    tmp = target.with_suffix(".tmp")
    proc = subprocess.run([go, "build", "-o", str(tmp), "."], cwd=COLLY_SRC, env=env, capture_output=True,
                          text=True, timeout=INSTALL_TIMEOUT_S, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise ToolError(f"go build of the colly peer failed: {' '.join(proc.stderr.split())[-400:]}")
    tmp.replace(target)
    return target


def scrapy_python(cache: Path | None = None) -> Path:
    """The Python of a virtualenv holding Scrapy ``SCRAPY_VERSION`` (made with pip on first use)."""
    cache = cache or cache_dir()
    venv = cache / f"scrapy-{SCRAPY_VERSION}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists():
        return python
    cache.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "-q", f"scrapy=={SCRAPY_VERSION}"],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            raise ToolError(f"installing Scrapy failed at {cmd[2]}: {' '.join(proc.stderr.split())[-400:]}")
    stamp.touch()
    return python
