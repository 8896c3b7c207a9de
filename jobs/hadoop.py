"""Where scripts/svc-hadoop.sh put Hadoop (local mode), and the mrjob arguments to use it.

mrjob's hadoop runner needs a ``hadoop`` command, the streaming jar, and file:// paths (otherwise it
turns temp and output paths into hdfs:// ones). Everything here is paths and argument lists.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = Path.home() / ".cache" / "crawlfleet" / "hadoop"


def hadoop_home() -> Path:
    """The install directory (``CRAWLFLEET_HADOOP_HOME`` overrides the default cache path)."""
    return Path(os.environ.get("CRAWLFLEET_HADOOP_HOME", str(DEFAULT_HOME)))


def streaming_jar(home: Path | None = None) -> Path | None:
    jars = sorted((home or hadoop_home()).glob("lib/hadoop-streaming-*.jar"))
    return jars[-1] if jars else None


def installed(home: Path | None = None) -> bool:
    home = home or hadoop_home()
    return (home / "bin" / "hadoop").is_file() and streaming_jar(home) is not None


def runner_args(tmp_dir: Path, *, home: Path | None = None) -> list[str]:
    """mrjob switches for ``-r hadoop`` in local mode, with temp space under ``tmp_dir``.

    Raises FileNotFoundError when Hadoop is not installed (run ``scripts/svc-hadoop.sh install``).
    """
    home = home or hadoop_home()
    jar = streaming_jar(home)
    if jar is None or not (home / "bin" / "hadoop").is_file():
        raise FileNotFoundError(f"no Hadoop in {home}: run scripts/svc-hadoop.sh install")
    tmp_dir.mkdir(parents=True, exist_ok=True)
    return [
        "--hadoop-bin", str(home / "bin" / "hadoop"),
        "--hadoop-streaming-jar", str(jar),
        "--hadoop-tmp-dir", tmp_dir.resolve().as_uri(),
        # Local mode writes no job-history logs for mrjob to dig through; skip the search.
        "--hadoop-log-dirs", str((home / "logs").resolve()),
    ]  # fmt: skip
