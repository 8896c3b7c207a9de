"""The broker connection rules (pipeline/transport/wire/tls.py) and secret redaction (settings/security.py)."""

from __future__ import annotations

import json
import ssl
import subprocess
from pathlib import Path

import pytest

from pipeline.settings import FleetSettings, Settings, load_settings_traced
from pipeline.settings.security import redact, redact_url, scrub
from pipeline.transport.wire import tls

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("url", ["amqp://guest:guest@127.0.0.1:5672//", "amqp://u:p@localhost/v",
                                 "amqp://u:p@[::1]:5672/v", "amqp://u:p@127.0.10.3/v"])  # fmt: skip
def test_plain_amqp_is_allowed_to_loopback(url: str) -> None:
    tls.check_broker(FleetSettings(broker_url=url))
    assert tls.kombu_ssl(FleetSettings(broker_url=url)) is None


@pytest.mark.parametrize("url", ["amqp://u:hunter2@10.0.0.5:5672/v", "amqp://u:hunter2@broker.example/v",
                                 "pyamqp://u:hunter2@192.168.1.2//"])  # fmt: skip
def test_plain_amqp_off_loopback_is_refused_without_the_password(url: str) -> None:
    with pytest.raises(tls.BrokerPolicyError) as err:
        tls.check_broker(FleetSettings(broker_url=url))
    assert "hunter2" not in str(err.value) and "not loopback" in str(err.value)


def test_amqps_needs_a_ca_and_a_whole_client_certificate(tmp_path: Path) -> None:
    url = "amqps://u:hunter2@broker.example:5671/v"
    with pytest.raises(tls.BrokerPolicyError, match="tls_ca"):
        tls.check_broker(FleetSettings(broker_url=url))
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(tls.BrokerPolicyError, match="go together"):
        tls.check_broker(FleetSettings(broker_url=url, tls_ca=str(ca), tls_cert=str(ca)))
    with pytest.raises(tls.BrokerPolicyError, match="no such file"):
        tls.check_broker(FleetSettings(broker_url=url, tls_ca=str(tmp_path / "missing")))
    key = tmp_path / "k.pem"
    key.write_text("x")
    key.chmod(0o644)
    with pytest.raises(tls.BrokerPolicyError, match="chmod 600"):
        tls.check_broker(FleetSettings(broker_url=url, tls_ca=str(ca), tls_cert=str(ca), tls_key=str(key)))
    key.chmod(0o600)
    opts = tls.kombu_ssl(FleetSettings(broker_url=url, tls_ca=str(ca), tls_cert=str(ca), tls_key=str(key)))
    assert opts == {"ca_certs": str(ca), "cert_reqs": ssl.CERT_REQUIRED, "server_hostname": "broker.example",
                    "certfile": str(ca), "keyfile": str(key)}  # fmt: skip


def test_the_password_file_replaces_the_urls_password(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("s3cr:t/@x\n")
    pw.chmod(0o600)
    url = tls.broker_url(
        FleetSettings(broker_url="amqps://node-a@b.example:5671/crawlfleet", broker_password_file=str(pw))
    )
    assert url == "amqps://node-a:s3cr%3At%2F%40x@b.example:5671/crawlfleet"
    # A URL with a password keeps it (an explicit URL overrides a settings file's user and password file).
    explicit = FleetSettings(broker_url="amqp://guest:guest@127.0.0.1//", broker_password_file=str(pw))
    assert tls.broker_url(explicit) == "amqp://guest:guest@127.0.0.1//"
    pw.chmod(0o640)
    with pytest.raises(tls.BrokerPolicyError):
        tls.broker_url(FleetSettings(broker_url="amqps://node-a@b.example/v", broker_password_file=str(pw)))


def test_client_context_verifies_the_broker_with_certs_from_the_script(tmp_path: Path) -> None:
    subprocess.run(
        [str(ROOT / "scripts" / "certs.sh"), "--dir", str(tmp_path), "n1"], check=True, capture_output=True
    )
    fleet = FleetSettings(broker_url="amqps://n@localhost:5671/v", tls_ca=str(tmp_path / "ca.pem"),
                          tls_cert=str(tmp_path / "client-n1.pem"), tls_key=str(tmp_path / "client-n1.key"))  # fmt: skip
    ctx = tls.client_context(fleet)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert oct((tmp_path / "client-n1.key").stat().st_mode & 0o777) == "0o600"


def test_redaction_masks_secrets_and_url_passwords() -> None:
    assert redact_url("amqps://u:p%40ss@h:5671/v") == "amqps://u:***@h:5671/v"
    assert redact_url("amqp://h//") == "amqp://h//"
    assert redact("fleet.key", "abc") == "***" and redact("fleet.key", "") == ""
    assert redact("fleet.node_key", "abc") == "***"
    assert redact("fleet.broker_url", "amqp://u:pw@h//") == "amqp://u:***@h//"
    assert redact("fetch.user_agent", "ua") == "ua"
    assert scrub("a secret and secret2", ["secret", "secret2"]) == "a *** and ***"


def test_settings_command_never_prints_a_secret(capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.crawl.flags import render

    env = {"CRAWLFLEET_BROKER_URL": "amqp://u:PW-SECRET-1@127.0.0.1//", "CRAWLFLEET_FLEET_KEY": "KEY-SECRET-2",
           "CRAWLFLEET_FLEET_NODE_KEY": "KEY-SECRET-3"}  # fmt: skip
    loaded = load_settings_traced(environ=env)
    text = render(loaded)
    for secret in ("PW-SECRET-1", "KEY-SECRET-2", "KEY-SECRET-3"):
        assert secret not in text
    assert 'key = "***"' in text
    from pipeline.storage.warcinfo import crawl_info

    assert all(s not in json.dumps(crawl_info(loaded.settings)) for s in ("KEY-SECRET-2", "PW-SECRET-1"))
    assert isinstance(Settings(), Settings)


def test_a_certificate_refused_either_way_is_named_a_ca_mismatch_with_its_fix() -> None:
    fleet = FleetSettings(broker_url="amqps://u@localhost:5671/v", tls_ca="var/certs/ca.pem",
                          tls_cert="var/certs/client-dispatcher.pem", tls_key="var/certs/client-dispatcher.key")  # fmt: skip
    ours = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                           "self-signed certificate in certificate chain (_ssl.c:1006)")  # fmt: skip
    line = tls.describe(ours, fleet)
    assert line.startswith("[SSL: CERTIFICATE_VERIFY_FAILED]") and "\n" not in line
    assert "CA mismatch: fleet.tls_ca var/certs/ca.pem does not verify" in line and "fleet-files.sh" in line
    theirs = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:2580)")
    assert "the broker does not trust fleet.tls_cert var/certs/client-dispatcher.pem" in tls.describe(theirs, fleet)
    # Wrapped, as pika and kombu may hand it on.
    try:
        try:
            raise ours
        except OSError as inner:
            raise ConnectionError("broker connection closed") from inner
    except ConnectionError as wrapped:
        assert "CA mismatch" in tls.describe(wrapped, fleet)


@pytest.mark.parametrize("exc", [ConnectionRefusedError(111, "Connection refused"), TimeoutError("timed out"),
                                 ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")])  # fmt: skip
def test_other_connection_failures_get_no_ca_hint(exc: OSError) -> None:
    fleet = FleetSettings(broker_url="amqps://u@localhost:5671/v", tls_ca="ca.pem")
    assert tls.tls_hint(exc, fleet) == ""
    assert tls.describe(exc, fleet) == str(exc)
