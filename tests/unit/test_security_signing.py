"""Signed fleet messages (pipeline/transport/wire/signing.py, msgauth.py): keys, signatures, replays."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pytest

from fetchers.records import Batch, UrlTask
from pipeline.settings import FleetSettings
from pipeline.transport.wire import signing
from pipeline.transport.wire.batchsend import BatchEncoder
from pipeline.transport.wire.messages import encode
from pipeline.transport.wire.msgauth import (
    LINKS_SIGNER,
    MessageKeys,
    check_batch,
    check_node_message,
    require_signing,
    signed_headers,
)
from pipeline.transport.wire.tls import BrokerPolicyError

FLEET_KEY = "f" * 64


@dataclass
class Msg:
    body: bytes
    headers: dict[str, Any] = field(default_factory=dict)
    content_type: str = "application/json"
    content_encoding: str = "utf-8"
    delivery_info: dict[str, Any] = field(default_factory=dict)


class BatchId(TypedDict):
    """What ReplayGuard.check knows a batch by."""

    service: str
    serial: int
    issued_at: float


def _batch(serial: int = 7, issued_at: float = 1000.0, url: str = "http://a.test/") -> Batch:
    return Batch(service="svc", serial=serial, fetcher_id="n1", issued_at=issued_at,
                 tasks=[UrlTask(url=url, url_id=1, depth=0)])  # fmt: skip


def _task(batch: Batch, *, node: str = "n1", key: str | None = None) -> Msg:
    msg = BatchEncoder(scope_json=None, sink_json={"store": "sqlite:/x.db", "segments": "/s", "warc": "",
                                                   "keep_body": True}).encode(batch, node=node, incarnation=None, expires_s=None)  # fmt: skip
    keys = MessageKeys(fleet_key=FLEET_KEY) if key is None else MessageKeys(own=key)
    return Msg(msg.body, dict(msg.headers, **signed_headers(keys, kind="batch", node=node, body=msg.body)))


def test_node_keys_differ_per_node_and_depend_on_the_fleet_key() -> None:
    a, b = signing.node_key(FLEET_KEY, "n1"), signing.node_key(FLEET_KEY, "n2")
    assert a != b and len(a) == 64
    assert signing.node_key("other", "n1") != a
    assert signing.node_key(FLEET_KEY, "n1") == a
    with pytest.raises(ValueError):
        signing.node_key("", "n1")


def test_a_signature_binds_kind_node_and_every_byte() -> None:
    sig = signing.sign("k", kind="batch", node="n1", body=b"abc")
    assert signing.verify("k", kind="batch", node="n1", body=b"abc", signature=sig) is None
    assert signing.verify("k", kind="batch", node="n1", body=b"abd", signature=sig) == "bad signature"
    assert signing.verify("k", kind="batch", node="n2", body=b"abc", signature=sig) == "bad signature"
    assert signing.verify("k", kind="results", node="n1", body=b"abc", signature=sig) == "bad signature"
    assert signing.verify("x", kind="batch", node="n1", body=b"abc", signature=sig) == "bad signature"
    assert signing.verify("k", kind="batch", node="n1", body=b"abc", signature=None) == "unsigned"
    assert signing.verify("k", kind="batch", node="n1", body=b"abc", signature=42) == "malformed signature"


def test_replay_guard_refuses_a_seen_serial_an_old_batch_and_a_future_one() -> None:
    guard = signing.ReplayGuard(max_age_s=120)
    ok: BatchId = {"service": "s", "serial": 1, "issued_at": 1000.0}
    assert guard.check(**ok, now=1010, redelivered=False) is None
    assert "accepted before" in (guard.check(**ok, now=1011, redelivered=False) or "")
    assert guard.check(**ok, now=1011, redelivered=True) is None  # the broker's re-delivery
    assert "lease" in (
        guard.check(service="s", serial=2, issued_at=1000.0, now=1121, redelivered=False) or ""
    )
    assert "future" in (
        guard.check(service="s", serial=3, issued_at=2000.0, now=1000, redelivered=False) or ""
    )


def test_replay_guard_memory_is_bounded() -> None:
    guard = signing.ReplayGuard(max_age_s=1e9, memory=10)
    for serial in range(100):
        assert guard.check(service="s", serial=serial, issued_at=0.0, now=1.0, redelivered=False) is None
    assert len(guard._seen) == 10


def test_a_node_accepts_its_own_signed_batch_once_and_refuses_the_rest() -> None:
    own = MessageKeys.for_node(FleetSettings(key=FLEET_KEY), "n1")
    guard = signing.ReplayGuard(max_age_s=120)
    msg = _task(_batch())
    assert check_batch(own, guard, node="n1", message=msg, now=1001) is None
    assert "replayed" in (check_batch(own, guard, node="n1", message=msg, now=1002) or "")
    # signed for another node, re-routed to this one
    assert (
        check_batch(own, guard, node="n1", message=_task(_batch(serial=8), node="n2"), now=1001)
        == "bad signature"
    )
    # tampered: one URL changed after signing
    tampered = _task(_batch(serial=9))
    tampered.body = tampered.body.replace(b"a.test", b"b.test")
    assert check_batch(own, guard, node="n1", message=tampered, now=1001) == "bad signature"
    # unsigned, and signed with a made-up key
    unsigned = _task(_batch(serial=10))
    unsigned.headers.pop("x-crawlfleet-sig")
    assert check_batch(own, guard, node="n1", message=unsigned, now=1001) == "unsigned"
    assert (
        check_batch(own, guard, node="n1", message=_task(_batch(serial=11), key="forged"), now=1001)
        == "bad signature"
    )
    # validly signed but older than the lease
    assert "lease" in (check_batch(own, guard, node="n1", message=_task(_batch(serial=12)), now=5000) or "")


def test_a_node_without_keys_checks_nothing_and_only_on_loopback() -> None:
    keys = MessageKeys.for_node(FleetSettings(), "n1")
    assert not keys.signing
    assert check_batch(keys, None, node="n1", message=Msg(b"[]"), now=0) is None
    require_signing(FleetSettings(), keys)  # loopback broker: allowed
    with pytest.raises(BrokerPolicyError):
        require_signing(FleetSettings(broker_url="amqps://u@broker.example:5671/v", tls_ca="/x"), keys)


def _results(node: str, *, kind: str = "results") -> bytes:
    return encode({"v": 1, "kind": kind, "node": node, "incarnation": "i", "results": [], "reports": []}).body


def test_the_dispatcher_takes_results_only_from_the_node_that_signed_them() -> None:
    dispatcher = MessageKeys.for_dispatcher(FleetSettings(key=FLEET_KEY))
    n1 = MessageKeys.for_node(FleetSettings(key=FLEET_KEY), "n1")
    body = _results("n1")
    good = Msg(body, signed_headers(n1, kind="results", node="n1", body=body))
    assert check_node_message(dispatcher, kind="results", message=good, max_bytes=1 << 20) is None
    # n1 speaks for n2 with its own key, or with a header that names n2
    body2 = _results("n2")
    as_n2 = Msg(body2, signed_headers(n1, kind="results", node="n1", body=body2))
    assert "speaks for" in (
        check_node_message(dispatcher, kind="results", message=as_n2, max_bytes=1 << 20) or ""
    )
    claims = Msg(
        body2, dict(signed_headers(n1, kind="results", node="n1", body=body2), **{"x-crawlfleet-node": "n2"})
    )
    assert "bad signature" in (
        check_node_message(dispatcher, kind="results", message=claims, max_bytes=1 << 20) or ""
    )
    # a heartbeat signature does not pass for results
    hb = Msg(body, signed_headers(n1, kind="heartbeat", node="n1", body=body))
    assert "bad signature" in (
        check_node_message(dispatcher, kind="results", message=hb, max_bytes=1 << 20) or ""
    )
    assert "unsigned" in (
        check_node_message(dispatcher, kind="results", message=Msg(body), max_bytes=1 << 20) or ""
    )


def test_links_reports_are_signed_by_the_links_signer_only() -> None:
    fleet = FleetSettings(key=FLEET_KEY)
    dispatcher = MessageKeys.for_dispatcher(fleet)
    from pipeline.transport.wire.msgauth import links_headers

    body = encode({"v": 1, "kind": "links", "segments": [], "hosts": {}}).body
    assert (
        check_node_message(
            dispatcher, kind="results", message=Msg(body, links_headers(fleet, body)), max_bytes=1 << 20
        )
        is None
    )
    # results passed off as the links signer's
    res = _results("n1")
    assert "links signer" in (
        check_node_message(
            dispatcher, kind="results", message=Msg(res, links_headers(fleet, res)), max_bytes=1 << 20
        )
        or ""
    )
    # a node cannot sign a links report
    n1 = MessageKeys.for_node(fleet, "n1")
    forged = Msg(body, signed_headers(n1, kind="results", node="n1", body=body))
    assert check_node_message(dispatcher, kind="results", message=forged, max_bytes=1 << 20) is not None
    assert LINKS_SIGNER.startswith(".")


def test_a_shards_block_is_signed_under_the_fleet_key_and_a_forged_one_refused() -> None:
    from pipeline.transport.wire.sidechannel import SHARDS_SIGNER, SideChannel

    fleet = FleetSettings(key=FLEET_KEY)
    side = SideChannel(fleet, "svc")  # no connection until it pushes or pulls
    body = b"a compressed block of hosts"
    headers = signed_headers(side.keys, kind="block", node=SHARDS_SIGNER, body=body)  # raised before "block"
    assert side._forged(Msg(body, headers)) is None
    assert side._forged(Msg(body + b"!", headers)) == "bad signature"
    n1 = MessageKeys.for_node(fleet, "n1")  # a node cannot sign a block
    assert side._forged(Msg(body, signed_headers(n1, kind="block", node="n1", body=body))) == "bad signature"
    assert side._forged(Msg(body)) == "unsigned"
    assert side._forged(Msg(body, signed_headers(side.keys, kind="results", node=SHARDS_SIGNER, body=body)))


def test_key_and_key_file_together_are_refused(tmp_path: Any) -> None:
    path = tmp_path / "k"
    path.write_text("secret\n")
    path.chmod(0o600)
    assert MessageKeys.for_dispatcher(FleetSettings(key_file=str(path))).fleet_key == "secret"
    with pytest.raises(BrokerPolicyError):
        MessageKeys.for_dispatcher(FleetSettings(key="x", key_file=str(path)))
    path.chmod(0o644)
    with pytest.raises(BrokerPolicyError, match="chmod 600"):
        MessageKeys.for_dispatcher(FleetSettings(key_file=str(path)))


def test_batch_json_in_the_task_body_is_what_the_signature_covers() -> None:
    msg = _task(_batch(url="http://c.test/x"))
    assert json.loads(msg.body)[0][0]["tasks"][0][0] == "http://c.test/x"
