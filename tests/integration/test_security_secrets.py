"""Secrets never reach a log: a fleet run whose broker URL carries a password (real RabbitMQ user),
with DEBUG logging, and the same processes pointed at an unreachable broker (the error paths that
print connection details). Every captured byte is searched for the password.

HBase credentials: StoreSettings has none (Thrift1 host/port/prefix only), so there is nothing to leak
on that side; the test checks the store settings carry no password field.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.harness.faults.bed import Bed
from pipeline.harness.faults.fleet import FleetRig
from pipeline.harness.faults.services import _rabbitmqctl, broker_vhost, free_port
from pipeline.harness.testbed.harness import TestbedProcess
from pipeline.settings import StoreSettings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secret_broker() -> Iterator[tuple[str, str, str]]:
    """(URL with password, password, URL of a closed port with the same password)."""
    password = f"S3cret-{uuid.uuid4().hex}"
    user = f"cfsec{uuid.uuid4().hex[:8]}"
    with broker_vhost() as guest_url:
        vhost = guest_url.rsplit("/", 1)[1]
        _rabbitmqctl(None, "add_user", user, password)
        try:
            _rabbitmqctl(None, "set_permissions", "-p", vhost, user, ".*", ".*", ".*")
            yield (f"amqp://{user}:{password}@127.0.0.1:5672/{vhost}", password,
                   f"amqp://{user}:{password}@127.0.0.1:{free_port()}/{vhost}")  # fmt: skip
        finally:
            _rabbitmqctl(None, "delete_user", user)


def leaks(root: Path, secret: str) -> list[str]:
    out = []
    for path in root.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            out.append(str(path.relative_to(root)))
    return out


def test_password_never_logged(secret_broker: tuple[str, str, str], tmp_path: Path) -> None:
    url, password, unreachable = secret_broker
    with TestbedProcess(3, 5, seed=1, workdir=tmp_path / "tb") as tb:
        bed = Bed(tb)
        # 1. Broker unreachable: dispatcher and worker retry and log why, for a few seconds.
        down = FleetRig(bed, unreachable, tmp_path / "down", log_level="DEBUG")
        try:
            down.start_worker(1)
            down.start_dispatcher()
            time.sleep(6.0)
        finally:
            down.close()
        # A password is refused in a flag (ps shows flags); the environment is where it may come from.
        submit = subprocess.run([sys.executable, "-m", "pipeline.cli", "submit", "--service", "s1",
                                 "http://site0.crawl.test/"], capture_output=True, timeout=120,
                                env=dict(os.environ, CRAWLFLEET_BROKER_URL=unreachable), check=False)  # fmt: skip
        (tmp_path / "submit.out").write_bytes(submit.stdout + submit.stderr)
        # 2. A real crawl through the broker with the password, DEBUG everywhere.
        rig = FleetRig(bed, url, tmp_path / "up", log_level="DEBUG")
        try:
            rig.start_worker(1)
            rig.start_dispatcher()
            summary = rig.wait_dispatcher()
        finally:
            rig.close()
    assert summary["pages_fetched"] > 0
    assert (tmp_path / "down" / "dispatcher.log").stat().st_size > 0  # the error paths did log
    found = leaks(tmp_path, password)
    assert found == [], f"password found in {found}"


def test_store_settings_hold_no_credentials() -> None:
    names = {f.name for f in dataclasses.fields(StoreSettings)}
    assert not {n for n in names if "pass" in n or "secret" in n or "token" in n}
