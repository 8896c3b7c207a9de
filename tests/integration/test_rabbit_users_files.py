"""scripts/rabbit-users.sh --files-only rewrites the node keys while processes read them (the dev stack starts
its workers beside the broker, whose start runs the script): a reader never sees a key file empty or cut."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "rabbit-users.sh"

pytestmark = pytest.mark.integration


def test_a_reader_never_sees_a_node_key_half_written(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    subprocess.run([str(SCRIPT), "--files-only", "--secrets", str(secrets), "edge1"], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    key_file = secrets / "node-edge1.key"
    key = key_file.read_text()
    assert len(key.strip()) == 64
    seen: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                seen.append(key_file.read_text())
            except FileNotFoundError:  # never expected: a rename replaces the file in one step
                seen.append("<missing>")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(8):  # each run derives the key again (same fleet key, same node key)
            subprocess.run([str(SCRIPT), "--files-only", "--secrets", str(secrets), "edge1"], check=True,
                           capture_output=True, timeout=60)  # fmt: skip
    finally:
        stop.set()
        reader.join()
    assert len(seen) > 100  # the reader ran all along
    assert set(seen) == {key}, {s[:8] for s in seen}
