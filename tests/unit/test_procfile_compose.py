"""The Procfile (honcho) and docker/compose.yaml describe the same dev stack: same services, same commands.

Compose cannot run here (no Docker engine), so this is the check that keeps the two in step. A
Procfile line is ``name: [VAR=value ...] command``; the container runs the same command with
``crawlfleet`` on PATH instead of ``.venv/bin/crawlfleet``, and the ``VAR=value`` words as its
``environment``. Every ``crawlfleet`` command line must also parse with the real CLI.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
_ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def procfile() -> dict[str, tuple[list[str], dict[str, str]]]:
    out = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, command = line.partition(":")
        words = shlex.split(command)
        env = {}
        while words and _ENV_WORD.match(words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if words[0].startswith(".venv/bin/"):
            words[0] = words[0].removeprefix(".venv/bin/")
        assert name.strip() not in out, f"duplicate Procfile entry {name}"
        out[name.strip()] = (words, env)
    return out


def compose() -> dict[str, tuple[list[str], dict[str, str]]]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    out = {}
    for name, svc in doc["services"].items():
        command = svc["command"]
        words = shlex.split(command) if isinstance(command, str) else list(command)
        env = svc.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        out[name] = (words, {k: str(v) for k, v in env.items()})
    return out


def test_same_services() -> None:
    assert sorted(procfile()) == sorted(compose())
    names = set(procfile())
    assert {"rabbitmq", "unbound", "hbase", "testbed", "dispatcher", "jobs"} <= names
    workers = [n for n in names if procfile()[n][0][:2] == ["crawlfleet", "worker"]]
    assert len(workers) >= 2


@pytest.mark.parametrize("name", sorted(procfile()))
def test_same_command_and_environment(name: str) -> None:
    assert compose()[name] == procfile()[name]


@pytest.mark.parametrize("name", sorted(procfile()))
def test_every_command_exists_and_parses(name: str) -> None:
    words, _env = procfile()[name]
    if words[0].startswith("scripts/"):
        script = ROOT / words[0]
        assert script.exists() and os.access(script, os.X_OK), script
        assert "run)" in script.read_text(), f"{script} has no foreground `run` action"
        return
    assert words[0] == "crawlfleet"
    args = build_parser().parse_args(words[1:])
    assert callable(args.func)


def test_worker_nodes_are_distinct_and_use_the_shared_resolver() -> None:
    nodes = []
    for words, _env in procfile().values():
        if words[:2] == ["crawlfleet", "worker"]:
            nodes.append(words[words.index("--node") + 1])
            assert words[words.index("--dns-server") + 1] == "127.0.0.1:5335"  # unbound (S1's lower DNS layer)
    assert len(nodes) == len(set(nodes))
