"""The crawl's plugins as the extract job takes them (``jobs.plugged``): specs, item root, format, limits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class ItemArgs:
    """The crawl's plugins in the extract job (``jobs.plugged``): their ``module:Name`` specs, the item root
    (a path or URI fsspec opens where the tasks run), the item files' format and the per-item size limit."""

    plugins: tuple[str, ...] = ()
    root: str = ""
    fmt: str = "jsonl"
    item_max_bytes: int = 1024 * 1024

    def to_json(self) -> dict[str, Any]:
        return {"plugins": list(self.plugins), "root": self.root, "fmt": self.fmt, "item_max_bytes": self.item_max_bytes}

    @classmethod
    def from_json(cls, obj: Any) -> ItemArgs:
        if not isinstance(obj, dict):
            return cls()
        return cls(tuple(str(p) for p in obj.get("plugins", ())), str(obj.get("root", "")), str(obj.get("fmt", "jsonl")),
                   int(obj.get("item_max_bytes", 1024 * 1024)))  # fmt: skip

    def args(self, *, store: str, work_dir: Path) -> list[str]:
        """The extract job's arguments for the plugins, with their code packed for the tasks (``--py-files``)."""
        if not self.plugins:
            return []
        from pipeline.plugins.shipping import pack

        out = [arg for spec in self.plugins for arg in ("--plugin", spec)]
        # No empty argument: Hadoop streaming passes the task's command line through a shell, which drops it.
        out += ["--items-format", self.fmt, "--item-max-bytes", str(self.item_max_bytes)]
        out += ["--items-root", self.root] if self.root else []
        out += ["--store", store] if store else []
        shipped = pack(self.plugins, work_dir)
        return [*out, "--py-files", str(shipped)] if shipped is not None else out
