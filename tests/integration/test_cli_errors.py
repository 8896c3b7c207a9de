"""A new user's mistakes, one row each: the real ``crawlfleet`` entry point answers with one line on
stderr that names the bad value, exit code 2 for a usage error and 1 for a runtime failure, and never
a traceback. Nothing here needs a shared service: broker and DNS addresses point at closed loopback ports.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).with_name("crawlfleet")
SEED = "http://a.example/"


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    code: int
    names: tuple[str, ...]  # each must appear in the one line (the bad value, the flag)
    env: tuple[tuple[str, str], ...] = ()


def c(*argv: str, code: int = 2, names: tuple[str, ...] = (), env: tuple[tuple[str, str], ...] = ()) -> Case:
    return Case(argv, code, names, env)


CASES: dict[str, Case] = {
    # crawl: flags checked at parse time
    "crawl-concurrency-0": c("crawl", "--concurrency", "0", SEED, names=("--concurrency", "0")),
    "crawl-quotas-file-missing": c("crawl", SEED, names=("dispatch.quotas_file", "/nonexistent/quotas.toml"),
                                   env=(("CRAWLFLEET_DISPATCH_QUOTAS_FILE", "/nonexistent/quotas.toml"),)),
    "crawl-concurrency-negative": c("crawl", "--concurrency", "-5", SEED, names=("--concurrency", "-5")),
    "crawl-host-delay-negative": c("crawl", "--host-delay", "-1", SEED, names=("--host-delay", "-1")),
    "crawl-max-pages-negative": c("crawl", "--max-pages", "-1", SEED, names=("--max-pages", "-1")),
    "crawl-max-depth-text": c("crawl", "--max-depth", "abc", SEED, names=("--max-depth", "abc")),
    "crawl-per-host-0": c("crawl", "--per-host", "0", SEED, names=("--per-host",)),
    "crawl-dns-server-nonsense": c("crawl", "--dns-server", "nonsense", SEED, names=("--dns-server", "nonsense")),
    "crawl-bad-cidr": c("crawl", "--allow-network", "10.0.0.0/33", SEED, names=("--allow-network", "10.0.0.0/33")),
    "crawl-unknown-flag": c("crawl", "--bogus", SEED, names=("--bogus",)),
    # crawl: seeds, files, settings
    "crawl-seed-not-url": c("crawl", "example.com", names=("example.com",)),
    "crawl-no-seed": c("crawl", "--out", "{tmp}/o", names=("seed",)),
    "crawl-seeds-file-missing": c("crawl", "--seeds-file", "{tmp}/nope.txt", names=("nope.txt",)),
    "crawl-seeds-file-garbage": c("crawl", "--seeds-file", "{tmp}/garbage.txt", names=("garbage.txt", "line 1")),
    "crawl-config-missing": c("crawl", "--config", "{tmp}/missing.toml", SEED, names=("missing.toml",)),
    "crawl-config-malformed": c("crawl", "--config", "{tmp}/bad.toml", SEED, names=("bad.toml", "TOML")),
    "crawl-config-unknown-key": c("crawl", "--config", "{tmp}/unknown.toml", SEED, names=("concurency",)),
    "crawl-config-bad-value": c("crawl", "--config", "{tmp}/zero.toml", SEED, names=("fetch.concurrency", "0")),
    "crawl-env-bad-value": c("crawl", SEED, "--out", "{tmp}/o", names=("CRAWLFLEET_FETCH_CONCURRENCY",),
                             env=(("CRAWLFLEET_FETCH_CONCURRENCY", "0"),)),
    "crawl-out-is-file": c("crawl", "--out", "{tmp}/file.txt", SEED, names=("file.txt",)),
    "crawl-out-holds-crawl": c("crawl", "--out", "{tmp}/held", SEED, names=("held", "--resume")),
    "crawl-resume-nothing": c("crawl", "--resume", "--out", "{tmp}/empty", names=("empty", "--resume")),
    # crawl: runtime failures (exit 1), nothing created
    "crawl-dns-unreachable": c("crawl", "http://nowhere.invalid/", "--dns-server", "127.0.0.1:{closed_udp}",
                               "--out", "{tmp}/o", code=1, names=("nowhere.invalid", "127.0.0.1:{closed_udp}")),
    "crawl-seed-blocked-by-guard": c("crawl", "http://127.0.0.1:{closed_tcp}/", "--out", "{tmp}/o", code=1,
                                     names=("127.0.0.1", "--allow-network")),
    # demo
    "demo-hosts-0": c("demo", "--hosts", "0", names=("--hosts", "0")),
    "demo-concurrency-0": c("demo", "--concurrency", "0", names=("--concurrency",)),
    "demo-out-not-its-own": c("demo", "--out", "{tmp}/mine", "--hosts", "1", "--pages", "1",
                              names=("mine", "--force")),
    # plugins: one line at start-up, nothing created
    "crawl-plugin-missing": c("crawl", SEED, "--out", "{tmp}/o", "--plugin", "nosuch.mod:Thing",
                              names=("nosuch.mod:Thing", "cannot import")),
    "crawl-plugin-bad-spec": c("crawl", SEED, "--out", "{tmp}/o", "--plugin", "a:b:c", names=("a:b:c",)),
    "crawl-plugin-entry-point": c("crawl", SEED, "--out", "{tmp}/o", "--plugin", "nosuchentry",
                                  names=("nosuchentry", "crawlfleet.plugins")),
    "crawl-items-format": c("crawl", SEED, "--out", "{tmp}/o", names=("plugins.items_format", "xml"),
                            env=(("CRAWLFLEET_PLUGINS_ITEMS_FORMAT", "xml"),)),
    "dispatcher-plugin-missing": c("dispatcher", SEED, "--out", "{tmp}/o", "--plugin", "nosuch.mod:Thing",
                                   names=("nosuch.mod:Thing",)),
    "export-pages-store-missing": c("export", "pages", "--out", "{tmp}/p", "--store", "sqlite:{tmp}/missing.db",
                                    names=("missing.db",)),
    "export-pages-format": c("export", "pages", "--out", "{tmp}/p", "--format", "xml", names=("--format", "xml")),
    # report, export
    "report-missing-dir": c("report", "{tmp}/no-crawl-here", names=("no-crawl-here",)),
    "export-store-missing": c("export", "warc", "--out", "{tmp}/w", "--store", "sqlite:{tmp}/missing.db",
                              names=("missing.db",)),
    "export-store-kind": c("export", "warc", "--out", "{tmp}/w", "--store", "mysql://db", names=("mysql://db",)),
    "export-max-bytes-0": c("export", "warc", "--out", "{tmp}/w", "--store", "sqlite:{tmp}/held/crawl.db",
                            "--max-bytes", "0", names=("--max-bytes", "0")),
    # jobs
    "jobs-segment-missing": c("jobs", "run", "--segment", "{tmp}/seg.jsonl", "--store", "sqlite:{tmp}/j.db",
                              names=("seg.jsonl",)),
    "jobs-batch-size-0": c("jobs", "run", "--segments-dir", "{tmp}", "--store", "sqlite:{tmp}/j.db",
                           "--batch-size", "0", names=("--batch-size", "0")),
    "jobs-runner-unknown": c("jobs", "run", "--runner", "nope", "--segments-dir", "{tmp}", "--store", "sqlite:x",
                             names=("nope",)),
    # dispatcher, worker, submit
    "dispatcher-seed-not-url": c("dispatcher", "not-a-url", names=("not-a-url",)),
    # a mistyped --out: one line, and nothing created there (before, a dispatcher waited for seeds in a new dir)
    "dispatcher-resume-nothing": c("dispatcher", "--resume", "--out", "{tmp}/typo", names=("typo", "--resume")),
    "dispatcher-heartbeat-0": c("dispatcher", "--heartbeat-s", "0", "--serve", names=("--heartbeat-s", "0")),
    "dispatcher-metrics-port": c("dispatcher", "--metrics-port", "70000", "--serve", names=("70000",)),
    "worker-bad-node": c("worker", "--node", "bad name!", names=("bad name!",)),
    "worker-slots-0": c("worker", "--node", "n1", "--slots", "0", names=("--slots", "0")),
    "worker-dns-server": c("worker", "--node", "n1", "--dns-server", "1.2.3", names=("1.2.3",)),
    "submit-seed-not-url": c("submit", "--service", "s", "nonurl", names=("nonurl",)),
    "submit-bad-service": c("submit", "--service", "a/b", SEED, names=("a/b",)),
    "submit-broker-down": c("submit", "--service", "s", SEED, code=1, names=("127.0.0.1:{closed_tcp}", "***"),
                            env=(("CRAWLFLEET_BROKER_URL", "amqp://guest:secret@127.0.0.1:{closed_tcp}//"),)),
    "submit-password-in-flag": c("submit", "--broker-url", "amqp://guest:secret@127.0.0.1:{closed_tcp}//",
                                 "--service", "s", SEED, names=("--broker-url", "***", "password")),
    "worker-password-in-flag": c("worker", "--node", "n1", "--broker-url", "amqps://n:secret@broker.example//",
                                 names=("--broker-url", "***")),
    # a broker URL the fleet refuses: one line from the worker too (it used to exec Celery, which printed two
    # tracebacks); broker.invalid never resolves, and nothing connects anywhere
    "worker-plain-amqp-off-loopback": c("worker", "--node", "n1", names=("broker.invalid", "not loopback"),
                                        env=(("CRAWLFLEET_BROKER_URL", "amqp://guest:secret@broker.invalid:5672//"),)),
    "worker-amqps-without-ca": c("worker", "--node", "n1", names=("amqps://", "fleet.tls_ca"),
                                 env=(("CRAWLFLEET_BROKER_URL", "amqps://broker.invalid:5671//"),)),
    "submit-service-not-in-quotas": c("submit", "--service", "nope", SEED, names=("nope", "quota"),
                                      env=(("CRAWLFLEET_DISPATCH_QUOTAS_FILE", "{quotas}"),)),
    # testbed
    "testbed-hosts-0": c("testbed", "serve", "--hosts", "0", "--pages", "1", names=("--hosts", "0")),
    "testbed-port-range": c("testbed", "serve", "--hosts", "1", "--pages", "1", "--port", "70000",
                            names=("--port", "70000")),
    "testbed-truth-text": c("testbed", "truth", "--hosts", "x", "--pages", "1", names=("--hosts", "x")),
    "testbed-dns-port-busy": c("testbed", "serve", "--hosts", "1", "--pages", "1", "--port", "0",
                               "--dns-port", "{busy}", "--no-ipv6", code=1, names=("{busy}",)),
    # the command itself, settings, bench
    "unknown-command": c("crawlz", names=("crawlz",)),
    "settings-bad-flag": c("settings", "--concurrency", "0", names=("--concurrency",)),
    "bench-unknown": c("bench", "nosuch", names=("nosuch",)),
}


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def busy() -> Iterator[int]:
    """A port held on 127.0.0.1 for both TCP and UDP (the testbed's DNS binds both)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        port = tcp.getsockname()[1]
        udp.bind(("127.0.0.1", port))
        yield port


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "file.txt").write_text("not a directory\n")
    (tmp_path / "garbage.txt").write_text("not a url\nexample.com/no-scheme\n\n# a comment\n")
    (tmp_path / "bad.toml").write_text("[fetch\nconcurrency = 3\n")
    (tmp_path / "unknown.toml").write_text("[fetch]\nconcurency = 3\n")
    (tmp_path / "zero.toml").write_text("[fetch]\nconcurrency = 0\n")
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "crawl.db").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    (tmp_path / "quotas.toml").write_text("[services]\ndefault = 50\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep me\n")
    return tmp_path


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_mistake_gets_one_line_naming_it(name: str, workspace: Path, busy: int) -> None:
    case = CASES[name]
    values = {"tmp": str(workspace), "closed_udp": str(_free_port(socket.SOCK_DGRAM)),
              "closed_tcp": str(_free_port(socket.SOCK_STREAM)), "busy": str(busy),
              "quotas": str(workspace / "quotas.toml")}  # fmt: skip
    argv = [a.format(**values) for a in case.argv]
    before = sorted(p.name for p in workspace.iterdir())
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    env |= {k: v.format(**values) for k, v in case.env}
    proc = subprocess.run([str(BIN), *argv], capture_output=True, text=True, timeout=60, env=env,
                          cwd=workspace, check=False)  # fmt: skip
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "secret" not in proc.stderr, "a password given on the command line was printed"
    assert len(lines) == 1, proc.stderr
    assert proc.returncode == case.code, proc.stderr
    for text in case.names:
        assert text.format(**values) in lines[0], lines[0]
    assert sorted(p.name for p in workspace.iterdir()) == before, "a failed command left files behind"
    if name == "demo-out-not-its-own":
        assert (workspace / "mine" / "precious.txt").read_text() == "keep me\n"


def test_there_are_enough_mistakes_across_the_commands() -> None:
    assert len(CASES) >= 30
    commands = {case.argv[0] for case in CASES.values()}
    assert {"crawl", "demo", "report", "export", "jobs", "dispatcher", "worker", "submit", "testbed"} <= commands


def test_debug_log_level_shows_the_traceback(workspace: Path) -> None:
    """The one place a traceback is wanted: asked for with --log-level DEBUG."""
    port = _free_port(socket.SOCK_STREAM)
    argv = ["crawl", f"http://127.0.0.1:{port}/", "--out", str(workspace / "o"), "--config", str(workspace / "bad.toml"),
            "--log-level", "DEBUG"]  # fmt: skip
    proc = subprocess.run([str(BIN), *argv], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0 and "Traceback" in proc.stderr
