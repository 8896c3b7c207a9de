"""What machine a benchmark or a reliability run measured on (recorded beside every figure)."""

from __future__ import annotations

import os
import platform
from typing import Any


def machine() -> dict[str, Any]:
    """Cores, CPU model (from /proc/cpuinfo), Python version."""
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"nproc": os.cpu_count() or 0, "cpu": model or platform.processor(), "python": platform.python_version()}
