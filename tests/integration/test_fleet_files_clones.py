"""Two clones of crawlfleet on one machine share one broker, so they share its CA and passwords.

``make services`` runs ``scripts/svc-rabbitmq.sh start``: in a second clone it attaches to the broker the
first clone set up. The dev stack's certificates and secrets are kept per machine
(``scripts/fleet-files.sh``: each clone's var/certs and var/secrets link there), so ``crawlfleet submit``
from the second clone gets through; a clone whose files differ from the broker's CA is told so on one
line, by ``make services`` and by ``submit``, with the fix.

A "clone" here is a directory holding links to this checkout's scripts, packages and docker/fleet (the
scripts find their clone from their own path). The broker is a private RabbitMQ node configured by
``svc-rabbitmq.sh conf`` run from the first clone; the machine directory is a temporary one
(``CRAWLFLEET_MACHINE_DIR``); the shared broker and ~/.cache/crawlfleet are never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.harness.faults.procs import wait_until
from tests.fixtures.rabbitmq import ROOT, RabbitNode, free_port, port_open

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CRAWLFLEET = Path(sys.executable).parent / "crawlfleet"
SEED = "http://site0.crawl.test:8080/"


def make_clone(path: Path) -> Path:
    path.mkdir(parents=True)
    for name in ("scripts", "pipeline", "fetchers", "jobs", ".venv"):
        (path / name).symlink_to(ROOT / name)
    (path / "docker").mkdir()
    (path / "docker" / "fleet").symlink_to(ROOT / "docker" / "fleet")
    return path


class ConfRabbit(RabbitNode):
    """A private node started with the config ``svc-rabbitmq.sh conf`` wrote into ``conf_dir``."""

    def __init__(self, workdir: Path, conf_dir: Path, tls_port: int) -> None:
        super().__init__(workdir)
        self.conf_dir, self.tls_port = conf_dir, tls_port

    def _env(self) -> dict[str, str]:
        env = super()._env()
        env["RABBITMQ_CONFIG_FILE"] = str(self.conf_dir / "rabbitmq.conf")
        env["RABBITMQ_ADVANCED_CONFIG_FILE"] = str(self.conf_dir / "advanced.config")
        return env


@dataclass
class Machine:
    """One machine's broker (private node) and the environment its clones' scripts and processes run with."""

    rabbit: ConfRabbit
    base_env: dict[str, str]
    home: Path  # the machine directory the first clone set the broker up from

    def env(self, machine_dir: Path) -> dict[str, str]:
        return {**self.base_env, "CRAWLFLEET_MACHINE_DIR": str(machine_dir)}

    def services(self, clone: Path, machine_dir: Path) -> subprocess.CompletedProcess[str]:
        """What ``make services`` does for RabbitMQ in ``clone``: attach to the running broker."""
        return subprocess.run([str(clone / "scripts" / "svc-rabbitmq.sh"), "start"], env=self.env(machine_dir),
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    def submit(self, clone: Path, machine_dir: Path) -> subprocess.CompletedProcess[str]:
        """``crawlfleet submit`` as the Procfile's comment shows it, run in ``clone`` (its var/ paths)."""
        env = {**self.env(machine_dir),
               "CRAWLFLEET_BROKER_URL": f"amqps://crawlfleet-dispatcher@localhost:{self.rabbit.tls_port}/crawlfleet"}  # fmt: skip
        return subprocess.run([str(CRAWLFLEET), "submit", "--config", "docker/fleet/dispatcher.toml", "--service",
                               "default", SEED], cwd=clone, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machine]:
    if shutil.which("rabbitmq-server") is None:
        subprocess.run([str(ROOT / "scripts" / "svc-rabbitmq.sh"), "install"], check=True, timeout=600)
    work = tmp_path_factory.mktemp("machine")
    tls_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    env.update(CRAWLFLEET_RABBITMQ_CONF_DIR=str(work / "conf"), CRAWLFLEET_RABBITMQ_TLS_PORT=str(tls_port))
    first = make_clone(work / "first")
    # The first clone sets the broker up: its config (and so the machine's CA) before the broker starts.
    subprocess.run([str(first / "scripts" / "svc-rabbitmq.sh"), "conf"], check=True, capture_output=True,
                   env={**env, "CRAWLFLEET_MACHINE_DIR": str(work / "machine")}, timeout=120)  # fmt: skip
    rabbit = ConfRabbit(work / "rabbit", work / "conf", tls_port).start()
    try:
        wait_until(lambda: port_open(tls_port), timeout_s=60, what="the broker's TLS listener")
        env.update(CRAWLFLEET_RABBITMQ_PORT=str(rabbit.port), RABBITMQ_NODENAME=rabbit.name)
        m = Machine(rabbit, env, work / "machine")
        done = m.services(first, work / "machine")  # attaches and makes the dev stack's users
        assert done.returncode == 0, done.stderr
        assert "CA mismatch" not in done.stderr, done.stderr
        yield m
    finally:
        rabbit.stop()


def test_a_second_clone_attaches_to_the_broker_and_submits(machine: Machine, tmp_path: Path) -> None:
    machine_dir = machine.home
    second = make_clone(tmp_path / "second")
    done = machine.services(second, machine_dir)
    assert done.returncode == 0, done.stderr
    assert "CA mismatch" not in done.stderr, done.stderr
    for name in ("certs", "secrets"):
        assert (second / "var" / name).resolve() == (machine_dir / name).resolve()
    sent = machine.submit(second, machine_dir)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "submitted 1 URL(s) to service default"


def test_a_clone_with_its_own_old_files_is_switched_to_the_machines(machine: Machine, tmp_path: Path) -> None:
    """A clone from before the files were kept per machine has its own CA in var/certs: the broker
    trusts the machine's, so the clone's pair is set aside (renamed, not deleted) and linked."""
    machine_dir = machine.home
    old = make_clone(tmp_path / "old")
    subprocess.run([str(old / "scripts" / "certs.sh"), "--dir", str(old / "var" / "certs"), "edge1", "edge2"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    (old / "var" / "secrets").mkdir(mode=0o700)
    done = machine.services(old, machine_dir)
    assert done.returncode == 0, done.stderr
    assert (old / "var" / "certs").is_symlink() and (old / "var" / "secrets").is_symlink()
    assert len(list((old / "var").glob("certs.replaced-*"))) == 1, sorted((old / "var").iterdir())
    assert machine.submit(old, machine_dir).returncode == 0


def test_a_ca_mismatch_is_named_on_one_line_with_its_fix(machine: Machine, tmp_path: Path) -> None:
    """A clone whose machine files hold another CA than the broker's (here: another machine directory) is
    told so by `make services` and by `submit`; `fleet-files.sh link` with the clone that set the broker
    up makes its files the machine's, and `submit` gets through."""
    machine_dir = machine.home
    other_dir = tmp_path / "other-machine"
    clone = make_clone(tmp_path / "clone")
    done = machine.services(clone, other_dir)
    assert done.returncode == 0, done.stderr
    said = [ln for ln in done.stderr.splitlines() if "CA mismatch" in ln]
    assert len(said) == 1 and "fleet-files.sh link" in said[0], done.stderr
    sent = machine.submit(clone, other_dir)
    assert sent.returncode == 1
    lines = sent.stderr.strip().splitlines()
    assert len(lines) == 1 and "CA mismatch" in lines[0] and "fleet.tls_ca var/certs/ca.pem" in lines[0], sent.stderr
    assert "Traceback" not in sent.stderr
    # The clone that set the broker up, from before the files were kept per machine: its own copies.
    setup = make_clone(tmp_path / "setup")
    (setup / "var").mkdir()
    for name in ("certs", "secrets"):
        shutil.copytree(machine_dir / name, setup / "var" / name, symlinks=True)
    fix = subprocess.run([str(clone / "scripts" / "fleet-files.sh"), "link", str(setup)],
                         env=machine.env(other_dir), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert fix.returncode == 0, fix.stderr
    assert (setup / "var" / "certs").resolve() == (other_dir / "certs").resolve()
    assert len(list(tmp_path.glob("other-machine/certs.replaced-*"))) == 1
    assert machine.submit(clone, other_dir).returncode == 0
    again = machine.services(clone, other_dir)
    assert "CA mismatch" not in again.stderr, again.stderr
