"""The dispatcher's one-pass check of a reply's slim results (messages._slim_result) agrees with
FetchResult.from_json: the same object for every valid result, a SchemaError for every bad one."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fetchers.records import FetchResult, Timings
from fetchers.schema import SchemaError
from pipeline.transport.wire.messages import BadMessage, _slim_result, parse_results
from pipeline.transport.wire.replies import slim

LIMIT = 1 << 20


def _result(**kw: Any) -> FetchResult:
    base: dict[str, Any] = dict(
        url="http://a.test/p/1", url_id=11, depth=2, final_url="http://a.test/p/2",
        redirects=["http://a.test/p/1"], status=200, content_type="text/html", wire_bytes=900, body_bytes=1200,
        timings=Timings(0.001, 0.002, 0.01, 0.02), ip="127.0.10.2", serial=5, fetcher_id="n#0",
        fetched_at=1795526183.5, retry_after_s=None, nofollow=True,
    )  # fmt: skip
    base.update(kw)
    return FetchResult(**base)


def _wire(result: FetchResult) -> dict[str, Any]:
    return dict(json.loads(json.dumps(slim(result))))


@pytest.mark.parametrize(
    "result",
    [
        _result(),
        _result(error_class="timeout", error_message="read", status=0, retry_after_s=3),
        _result(url="http://ü.test/ä", final_url="", redirects=[]),  # not ASCII: the full path
        _result(truncated=True, timings=Timings(0, 0, 0, 0), fetched_at=0),
    ],
)
def test_same_object_as_from_json(result: FetchResult) -> None:
    obj = _wire(result)
    assert _slim_result(copy.deepcopy(obj), LIMIT) == FetchResult.from_json(obj, max_body_bytes=LIMIT)


BAD: list[tuple[str, Any]] = [
    ("url_id", True), ("url_id", "1"), ("depth", 1.5), ("status", None), ("serial", False),
    ("url", 7), ("final_url", None), ("url", "http://a.test/\ud800"), ("content_type", 1),
    ("redirects", "x"), ("redirects", [1]), ("timings", [0, 0, 0]), ("timings", [0, 0, 0, True]),
    ("timings", [0, 0, 0, float("nan")]), ("timings", [0, 0, 0, 10**400]), ("fetched_at", "now"),
    ("fetched_at", float("inf")), ("retry_after_s", "soon"), ("truncated", 1), ("ip", None),
    ("error_class", 0), ("fetcher_id", []),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value"), BAD)
def test_bad_fields_fare_as_with_from_json(name: str, value: Any) -> None:
    """Refused by both, or (a bool timing, which from_json takes as a number) the same object."""
    obj = _wire(_result())
    obj[name] = value
    try:
        expected: FetchResult | None = FetchResult.from_json(copy.deepcopy(obj), max_body_bytes=LIMIT)
    except SchemaError:
        expected = None
    if expected is None:
        with pytest.raises(SchemaError):
            _slim_result(obj, LIMIT)
    else:
        assert _slim_result(obj, LIMIT) == expected


def test_most_bad_fields_are_refused() -> None:
    refused = 0
    for name, value in BAD:
        obj = _wire(_result())
        obj[name] = value
        try:
            _slim_result(obj, LIMIT)
        except SchemaError:
            refused += 1
    assert refused == len(BAD) - 1  # all but the bool timing


@pytest.mark.parametrize("missing", ["url", "url_id", "timings", "fetched_at", "truncated", "serial", "ip"])
def test_missing_field_raises(missing: str) -> None:
    obj = _wire(_result())
    del obj[missing]
    with pytest.raises(SchemaError):
        _slim_result(obj, LIMIT)


def test_a_result_with_a_body_takes_the_full_path() -> None:
    full = _result()
    full.body = b"<html>hello</html>"
    full.headers = {"content-type": "text/html"}
    obj = json.loads(json.dumps(full.to_json()))
    assert _slim_result(obj, LIMIT) == FetchResult.from_json(obj, max_body_bytes=LIMIT)


def test_a_hostile_reply_is_a_bad_message_not_a_crash() -> None:
    reply = {"v": 1, "kind": "results", "node": "n", "incarnation": "i", "stored": True, "segment": "",
             "results": [_wire(_result()), {"url": "x"}], "reports": []}  # fmt: skip
    with pytest.raises(BadMessage):
        parse_results(reply, max_body_bytes=LIMIT)
    reply["results"] = ["not an object"]
    with pytest.raises(BadMessage):
        parse_results(reply, max_body_bytes=LIMIT)
