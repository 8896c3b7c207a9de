"""Fleet wire format: envelopes, size limits, the one reply per batch, heartbeats, submits, topology names."""

from __future__ import annotations

import json
import zlib

import pytest

from fetchers.records import FetchResult, UrlTask
from fetchers.report import BatchReport
from pipeline.settings import FleetSettings
from pipeline.transport.wire import topology
from pipeline.transport.wire.messages import (
    BadMessage,
    NodeHeartbeat,
    decode,
    encode,
    parse_heartbeat,
    parse_results,
    parse_submit,
    submit_message,
)
from pipeline.transport.wire.replies import reply_text

LIMIT = 64 * 1024


def _decode(enc: object, limit: int = LIMIT) -> dict:
    return decode(enc.body, content_type=enc.content_type, content_encoding=enc.content_encoding, max_bytes=limit)  # type: ignore[attr-defined]


def _result(i: int, body: bytes = b"<html>hi</html>") -> FetchResult:
    return FetchResult(f"http://a.test/{i}", i, 1, status=200, body=body, serial=7, content_type="text/html")


@pytest.mark.parametrize("compress", [False, True])
def test_encode_decode_round_trip(compress: bool) -> None:
    obj = {"v": 1, "kind": "submit", "service": "s", "urls": ["http://a.test/"]}
    assert _decode(encode(obj, compress=compress)) == obj


@pytest.mark.parametrize(
    ("body", "ctype", "cenc", "reason"),
    [
        (b"{not json", "application/json", "utf-8", "not JSON"),
        (b"\xff\xfe", "application/json", "utf-8", "not JSON"),
        (b"[1, 2]", "application/json", "utf-8", "not a JSON object"),
        (b'{"v": 2}', "application/json", "utf-8", "unknown version"),
        (b'{"v": 1}', "application/x-python-serialize", "binary", "content_type"),
        (b'{"v": 1}', "application/json", "gzip", "unknown content_encoding"),
        (b"\x00garbage", "application/json", "deflate", "bad deflate body"),
        (b"x" * (LIMIT + 1), "application/json", "utf-8", "oversized"),
    ],
)
def test_decode_rejects_with_reason(body: bytes, ctype: str, cenc: str, reason: str) -> None:
    with pytest.raises(BadMessage, match=reason):
        decode(body, content_type=ctype, content_encoding=cenc, max_bytes=LIMIT)


def test_decode_bounds_the_inflated_size_too() -> None:
    bomb = zlib.compress(b'{"v":1,"pad":"' + b"a" * (LIMIT * 4) + b'"}')
    assert len(bomb) < LIMIT
    with pytest.raises(BadMessage, match="oversized"):
        decode(bomb, content_type="application/json", content_encoding="deflate", max_bytes=LIMIT)


def test_a_reply_round_trips_without_bodies_and_with_its_report() -> None:
    results = [_result(i) for i in range(5)]
    report = BatchReport(7, "n1#0", 5, 0.5, unfinished=[UrlTask("http://a.test/9", 9, 1)])
    text = reply_text("n1", "i1", results, report, segment="/seg/n1/default-7.jsonl")
    pack = parse_results(_decode(encode(json.loads(text))), max_body_bytes=LIMIT)
    assert (pack.node, pack.incarnation, pack.stored, pack.segment) == ("n1", "i1", True, "/seg/n1/default-7.jsonl")
    assert [r.url for r in pack.results] == [r.url for r in results]
    assert all(r.body == b"" and r.body_bytes == len(b"<html>hi</html>") for r in pack.results)
    assert [(r.serial, [t.url for t in r.unfinished]) for r in pack.reports] == [(7, ["http://a.test/9"])]


@pytest.mark.parametrize(
    "obj",
    [
        {"v": 1, "kind": "heartbeat"},
        {"v": 1, "kind": "results", "node": 3, "incarnation": "i", "results": [], "reports": []},
        {"v": 1, "kind": "results", "node": "n", "incarnation": "i", "results": [{"url": 1}], "reports": []},
        {"v": 1, "kind": "results", "node": "n", "incarnation": "i", "results": [], "reports": [{"serial": "x"}]},
        {"v": 1, "kind": "results", "node": "n", "incarnation": "i", "results": [], "reports": [[1]]},
        {"v": 1, "kind": "results", "node": "n", "incarnation": "i", "results": {}, "reports": []},
        {"v": 1, "kind": "results", "node": "n", "incarnation": "i", "results": [],
         "reports": [{"serial": 1, "fetcher_id": "f", "pages": -1, "elapsed_s": 0}]},
    ],
)
def test_results_schema_errors(obj: dict) -> None:
    with pytest.raises(BadMessage):
        parse_results(obj, max_body_bytes=LIMIT)


def test_heartbeat_round_trip_and_split_per_virtual_fetcher() -> None:
    hb = NodeHeartbeat("n1", "inc", 12.5, successes=10, failures=2, rate=40.0, free_slots=200, slots=4, active=1,
                       address="fetch.n1", held=[("svc", 7, "n1#0"), ("svc", 9, "n1#3")])  # fmt: skip
    back = parse_heartbeat(json.loads(json.dumps(hb.to_json())))
    assert back == hb
    old = hb.to_json()
    del old["held"]  # a node from before the field: nothing held is named
    assert parse_heartbeat(old).held == []
    s1 = back.for_fetcher("n1#2", share=4)
    assert (s1.fetcher_id, s1.rate, s1.free_slots, s1.successes) == ("n1#2", 10.0, 50, 10)


def test_heartbeat_q_per_crawl_a_node_serves() -> None:
    hb = NodeHeartbeat("n1", "inc", 1.0, 0, 0, 8.0, free_slots=300, slots=4, active=1,
                       free_by_service={"crawl-a": 100, "crawl-b": 200, "": 512})  # fmt: skip
    back = parse_heartbeat(json.loads(json.dumps(hb.to_json())))
    assert back == hb
    assert back.for_fetcher("n1#0", share=4, service="crawl-a").free_slots == 25  # its own fetcher's, not 300
    assert back.for_fetcher("n1#0", share=4, service="crawl-c").free_slots == 128  # no fetcher here yet
    assert back.for_fetcher("n1#0", share=4).free_slots == 75  # the node's whole q
    old = hb.to_json()
    del old["free_by_service"]  # a node from before the field: every crawl reads free_slots
    assert parse_heartbeat(old).for_fetcher("n1#0", share=4, service="crawl-a").free_slots == 75


@pytest.mark.parametrize(
    "change", [{"slots": 0}, {"active": -1}, {"rate": "fast"}, {"successes": True}, {"node": None}, {"slots": 10**6},
               {"held": {"svc": 1}}, {"held": [["svc", "7", "n1#0"]]}, {"held": [["svc", True, "n1#0"]]},
               {"held": [["svc", 7]]}, {"held": [["svc", 7, "n1#0"]] * 5000}, {"free_by_service": [1]},
               {"free_by_service": {"svc": -1}}, {"free_by_service": {"svc": True}}, {"free_by_service": {"svc": 1.5}},
               {"free_by_service": {f"s{i}": 1 for i in range(300)}}],
)
def test_heartbeat_schema_errors(change: dict) -> None:
    obj = NodeHeartbeat("n1", "inc", 1.0, 0, 0, 0.0, 1, 1, 0).to_json() | change
    with pytest.raises(BadMessage, match="wrong schema"):
        parse_heartbeat(obj)


def test_submit_round_trip_and_errors() -> None:
    assert parse_submit(submit_message("svc", ["http://a.test/"])) == ("svc", ["http://a.test/"])
    with pytest.raises(BadMessage):
        parse_submit({"v": 1, "kind": "submit", "service": "svc", "urls": [1]})
    with pytest.raises(BadMessage):
        parse_submit({"v": 1, "kind": "results"})


def test_topology_names_and_dead_letter_arguments() -> None:
    fleet = FleetSettings()
    q = topology.fetch_queue("n1")
    assert q.name == "fetch.n1" == topology.fetch_queue("fetch.n1").name
    assert q.queue_arguments == {"x-dead-letter-exchange": topology.DEAD_EXCHANGE}  # type: ignore[attr-defined]
    rq = topology.results_queue(fleet, "svc")
    assert rq.name == "crawlfleet.results.svc"
    assert rq.queue_arguments["x-dead-letter-exchange"] == topology.DEAD_EXCHANGE  # type: ignore[attr-defined]
    hbq = topology.heartbeat_queue(fleet, service="svc", ttl_s=4)
    assert hbq.exclusive and hbq.queue_arguments == {"x-message-ttl": 4000}  # type: ignore[attr-defined]
    for bad in ("", "a.b", "a b", "x" * 65, "-lead"):
        with pytest.raises(ValueError):
            topology.fetch_queue_name(bad)
