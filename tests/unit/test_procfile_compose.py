"""The Procfile (honcho) and docker/compose.yaml describe the same dev stack: same services, same commands.

Compose cannot run here (no Docker engine), so this is the check that keeps the two in step. A
Procfile line is ``name: [VAR=value ...] [scripts/wait-for.sh DEP... --] command``; the container runs
the same command with ``crawlfleet`` on PATH instead of ``.venv/bin/crawlfleet``, and the ``VAR=value``
words as its ``environment``. The wait-for wrapper (its dependencies included) must be the same in
both; the command after its ``--`` is what must parse with the real CLI. Every crawlfleet process
waits for the services it needs, and ``scripts/wait-for.sh`` itself is tried on real sockets.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
_ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")
WAIT_FOR = "scripts/wait-for.sh"
_DEP = re.compile(r"^(tcp|amqp|hbase):[^:]+:[0-9]+$")
# Where the dev stack's services listen (the Procfile's and compose's addresses).
RABBITMQ, HBASE, UNBOUND, TESTBED_DNS = "amqp:127.0.0.1:5672", "hbase:127.0.0.1:9090", "tcp:127.0.0.1:5335", "tcp:127.0.0.1:5353"
DQ_DNS = "tcp:127.0.0.1:5336"  # `crawlfleet dns serve`: S1's bottom DNS layer, shared by the nodes


def unwrap(words: list[str]) -> tuple[list[str], list[str]]:
    """(the dependencies ``scripts/wait-for.sh`` waits for, the command it then runs)."""
    if not words or words[0] != WAIT_FOR:
        return [], words
    assert "--" in words, f"{WAIT_FOR} without `--` before its command: {words}"
    i = words.index("--")
    deps, options = [], iter(words[1:i])
    for word in options:
        if word in ("--timeout", "--interval"):
            next(options)  # its value
        elif not word.startswith("--"):
            deps.append(word)
    return deps, words[i + 1 :]


def normalize(words: list[str]) -> list[str]:
    """The command as the container runs it: ``.venv/bin/crawlfleet`` -> ``crawlfleet``, after the wrapper."""
    deps, command = unwrap(words)
    prefix = words[: len(words) - len(command)]
    if command and command[0].startswith(".venv/bin/"):
        command = [command[0].removeprefix(".venv/bin/"), *command[1:]]
    return prefix + command


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
        assert name.strip() not in out, f"duplicate Procfile entry {name}"
        out[name.strip()] = (normalize(words), env)
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
    assert {"rabbitmq", "unbound", "dns", "hbase", "testbed", "dispatcher", "jobs"} <= names
    workers = [n for n in names if command(n)[:2] == ["crawlfleet", "worker"]]
    assert len(workers) >= 2


@pytest.mark.parametrize("name", sorted(procfile()))
def test_same_command_and_environment(name: str) -> None:
    assert compose()[name] == procfile()[name]


def command(name: str) -> list[str]:
    return unwrap(procfile()[name][0])[1]


def deps(name: str) -> list[str]:
    return unwrap(procfile()[name][0])[0]


@pytest.mark.parametrize("name", sorted(procfile()))
def test_every_command_exists_and_parses(name: str) -> None:
    wrapped, _env = procfile()[name]
    if wrapped[0] == WAIT_FOR:
        script = ROOT / WAIT_FOR
        assert script.exists() and os.access(script, os.X_OK), script
        assert deps(name), f"{name}: {WAIT_FOR} with nothing to wait for"
        assert all(_DEP.match(d) for d in deps(name)), deps(name)
    words = command(name)
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
    for name in procfile():
        words = command(name)
        if words[:2] == ["crawlfleet", "worker"]:
            nodes.append(words[words.index("--node") + 1])
            assert words[words.index("--dns-server") + 1] == "127.0.0.1:5336"  # S1's bottom DNS layer
    dns = command("dns")
    assert dns[:3] == ["crawlfleet", "dns", "serve"]
    assert dns[dns.index("--listen") + 1] == "127.0.0.1:5336"
    assert dns[dns.index("--upstream") + 1] == "127.0.0.1:5335"  # unbound, the upper layer
    assert len(nodes) == len(set(nodes))


def test_every_process_waits_for_the_services_it_needs() -> None:
    """The dispatcher and the link jobs need RabbitMQ and HBase; a worker (a fetch node, which stores its
    pages itself on the design card's loop) RabbitMQ, HBase, the shared DNS server and the testbed's DNS (which
    unbound forwards crawl.test to); the shared DNS server unbound; the services and the testbed wait for nothing."""
    needs = {"dispatcher": {RABBITMQ, HBASE}, "jobs": {RABBITMQ, HBASE}, "dns": {UNBOUND}}
    for name in procfile():
        words = command(name)
        if words[:2] == ["crawlfleet", "worker"]:
            assert {RABBITMQ, HBASE, DQ_DNS, TESTBED_DNS} <= set(deps(name)), (name, deps(name))
        elif name in needs:
            assert needs[name] <= set(deps(name)), (name, deps(name))
        elif words[0].startswith("scripts/svc-") or words[:2] == ["crawlfleet", "testbed"]:
            assert deps(name) == [], (name, deps(name))
        else:
            raise AssertionError(f"{name}: say here what it needs")


def test_dispatcher_and_link_jobs_share_one_crawl() -> None:
    """Same store (HBase), same crawl directory, same service: the link jobs read the nodes' segments under
    the dispatcher's --out and report to its results queue."""
    dispatcher, jobs = command("dispatcher"), command("jobs")
    assert jobs[:2] == ["crawlfleet", "links"]
    for name in ("dispatcher", "jobs"):
        assert procfile()[name][1].get("CRAWLFLEET_STORE_KIND") == "hbase", name
    for flag in ("--out", "--service"):
        assert dispatcher[dispatcher.index(flag) + 1] == jobs[jobs.index(flag) + 1], flag


# --- scripts/wait-for.sh on real sockets ----------------------------------------------------------------
def _wait_for(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / WAIT_FOR), *args], capture_output=True, text=True, timeout=timeout, check=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the socket is


def test_wait_for_runs_the_command_once_its_dependencies_answer() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        proc = _wait_for("--timeout", "5", f"tcp:127.0.0.1:{port}", "--", "sh", "-c", 'echo "ran $0 $1"', "a b", "c")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran a b c\n"  # exec'd with its arguments intact
    assert proc.stderr.splitlines() == [f"wait-for: tcp:127.0.0.1:{port} up"]


@pytest.mark.parametrize("kind", ["tcp", "amqp", "hbase"])
def test_wait_for_gives_up_after_its_timeout_with_one_line(kind: str) -> None:
    port = _closed_port()
    proc = _wait_for("--timeout", "1", "--interval", "0.2", f"{kind}:127.0.0.1:{port}", "--", "sh", "-c", "echo ran")
    assert proc.returncode == 1
    assert proc.stdout == ""  # the command never ran
    errors = [line for line in proc.stderr.splitlines() if "gave up" in line]
    assert len(errors) == 1 and f"{kind}:127.0.0.1:{port}" in errors[0], proc.stderr
    # It waited its timeout out (its own clock, not a timed assertion on this loaded machine).
    assert re.search(r"gave up after [1-9][0-9]*s", errors[0]), errors[0]


@pytest.mark.parametrize("args", [["tcp:127.0.0.1:1"], ["nonsense", "--", "true"],
                                  ["--timeout", "soon", "tcp:127.0.0.1:1", "--", "true"]])
def test_wait_for_usage_errors(args: list[str]) -> None:
    proc = _wait_for(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and proc.stderr.strip()


def test_the_fleet_bench_runs_nodes_at_the_dev_stacks_priority() -> None:
    """``bench fleet`` measures the fleet as the dev stack runs it: its nodes' ``fleet.node_nice``."""
    import tomllib

    from pipeline.harness.bench.fleet import DEV_STACK_NODE_NICE

    for path in sorted((ROOT / "docker" / "fleet").glob("node-*.toml")):
        assert tomllib.loads(path.read_text())["fleet"]["node_nice"] == DEV_STACK_NODE_NICE, path
