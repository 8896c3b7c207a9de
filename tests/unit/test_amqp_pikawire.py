"""pikawire: pika reaches the vhost kombu reaches from the same ``fleet.broker_url``."""

from __future__ import annotations

import pytest

from pipeline.settings import FleetSettings
from pipeline.transport.wire.pikawire import connection_parameters


@pytest.mark.parametrize(("url", "vhost"), [
    ("amqp://guest:guest@127.0.0.1:5672//", "/"),  # kombu's spelling of "/" (pika alone would read "")
    ("amqp://guest:guest@127.0.0.1:5672/", "/"),
    ("amqp://127.0.0.1", "/"),
    ("amqp://guest:guest@127.0.0.1:5672/cf-test-1", "cf-test-1"),
    ("amqp://u:p%40ss@h:1234/%2Fv", "/v"),
])  # fmt: skip
def test_vhost_as_kombu_reads_it(url: str, vhost: str) -> None:
    params = connection_parameters(url, name="x")
    assert params.virtual_host == vhost
    assert params.heartbeat == 0 and params.client_properties["connection_name"] == "x"


def test_credentials_port_and_defaults() -> None:
    p = connection_parameters("amqp://u:p%40ss@h:1234/%2Fv", name="x")
    assert (p.host, p.port, p.credentials.username, p.credentials.password) == ("h", 1234, "u", "p@ss")
    d = connection_parameters(FleetSettings().broker_url, name="x")
    assert (d.host, d.port, d.credentials.username, d.virtual_host) == ("127.0.0.1", 5672, "guest", "/")


def test_tls_is_refused() -> None:
    with pytest.raises(ValueError, match="amqp"):
        connection_parameters("amqps://h:5671//", name="x")
