"""The fetch task's argument checks, the scope codec, the Celery config contract, the worker command line."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from fetchers.records import Batch, UrlTask
from pipeline.settings import Settings
from pipeline.transport.node.celery_app import make_app
from pipeline.transport.wire import topology
from pipeline.transport.wire.messages import BadMessage
from pipeline.transport.wire.taskmsg import (
    check_task_message,
    parse_task_args,
    scope_from_json,
    scope_to_json,
)
from pipeline.urls import Scope

BATCH = Batch(3, "n1#0", [UrlTask("http://a.test/", 11, 0)], service="svc", issued_at=1.0)
SINK = {"store": "hbase://127.0.0.1:9090/cf", "segments": "/srv/segments", "warc": "", "keep_body": False}


@dataclass
class RawMessage:
    """The attributes of a kombu message the pre-decode check reads."""

    body: bytes
    content_type: str = "application/json"
    content_encoding: str = "utf-8"
    headers: dict[str, Any] = field(default_factory=lambda: {"task": topology.TASK_NAME})


def _celery_body(args: list[Any], kwargs: dict[str, Any]) -> bytes:
    return json.dumps([args, kwargs, {"callbacks": None}]).encode()


def test_parse_task_args_accepts_the_dispatcher_message() -> None:
    scope = Scope.build(["http://a.test/"], deny_regex=(r"\?sid=",))
    batch, inc, back, sink = parse_task_args([BATCH.to_json()],
                                             {"incarnation": "i1", "scope": scope_to_json(scope), "sink": SINK})
    assert (batch.serial, batch.tasks[0].url_id, inc, sink.to_json()) == (3, 11, "i1", SINK)
    assert back is not None and back.allows("http://www.a.test/x") and not back.allows("http://a.test/?sid=1")
    assert not back.allows("http://b.test/")


@pytest.mark.parametrize(
    ("args", "kwargs", "reason"),
    [
        ([], {}, "exactly one"),
        ([BATCH.to_json(), 1], {}, "exactly one"),
        ([{"serial": "x"}], {}, "batch"),
        ([BATCH.to_json() | {"service": "a b"}], {}, "service name"),
        ([BATCH.to_json()], {"surprise": 1}, "unknown arguments"),
        ([BATCH.to_json()], {"incarnation": 5}, "incarnation"),
        ([BATCH.to_json()], {"scope": {"domains": "a.test"}}, "scope"),
        ([BATCH.to_json()], {"scope": {"domains": [], "allow": ["("], "deny": []}}, "scope"),
        ([BATCH.to_json()], {"incarnation": "i1"}, "no sink"),  # the old loop's task: nodes store pages now
        ([BATCH.to_json()], {"sink": SINK | {"segments": "rel/dir"}}, "sink"),
    ],
)
def test_parse_task_args_rejects(args: list[Any], kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadMessage, match=reason):
        parse_task_args(args, kwargs)


def test_check_task_message_passes_a_good_message() -> None:
    check_task_message(RawMessage(_celery_body([BATCH.to_json()], {"sink": SINK})), max_bytes=10_000)


@pytest.mark.parametrize(
    ("msg", "reason"),
    [
        (RawMessage(b"x" * 20_000), "oversized"),
        (RawMessage(_celery_body([BATCH.to_json()], {}), headers={}), "not a crawlfleet.fetch_batch"),
        (RawMessage(_celery_body([BATCH.to_json()], {}), headers={"task": "os.system"}), "not a crawlfleet"),
        (RawMessage(b"\x80\x04pickle", content_type="application/x-python-serialize"), "content_type"),
        (RawMessage(b"{oops"), "not JSON"),
        (RawMessage(b'{"a": 1}'), "Celery body"),
        (RawMessage(_celery_body([{"serial": 1}], {})), "wrong schema"),
        (RawMessage(_celery_body([BATCH.to_json()], {})), "no sink"),
    ],
)
def test_check_task_message_rejects(msg: RawMessage, reason: str) -> None:
    with pytest.raises(BadMessage, match=reason):
        check_task_message(msg, max_bytes=10_000)


def test_scope_codec_round_trip_and_none() -> None:
    scope = Scope.build(["http://x.example.com/"], allow_regex=("/p/",), deny_regex=("/private",))
    back = scope_from_json(json.loads(json.dumps(scope_to_json(scope))))
    assert back is not None
    assert back == Scope(scope.domains, back.allow, back.deny)
    assert [p.pattern for p in back.allow] == ["/p/"] and [p.pattern for p in back.deny] == ["/private"]
    assert scope_from_json(None) is None and scope_to_json(None) is None


def test_celery_config_is_json_only_and_acks_late() -> None:
    app = make_app(Settings())
    conf = app.conf
    assert conf.task_serializer == "json" and list(conf.accept_content) == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1 and conf.broker_connection_retry_on_startup
    assert conf.broker_url == Settings().fleet.broker_url
    assert conf.worker_consumer.endswith(":FleetConsumer")
    queue = app.amqp.queues["fetch.node7"]  # created on demand with the fleet's arguments
    assert queue.queue_arguments == {"x-dead-letter-exchange": topology.DEAD_EXCHANGE}


def test_worker_command_wraps_celery_on_the_threads_pool() -> None:
    from pipeline.transport.cli import worker_command

    args = argparse.Namespace(node="edge1", slots=6, config=None, broker_url="amqp://u:p@127.0.0.1:5672/v",
                              dns_server=["127.0.0.1:5353"], allow_network=["127.0.0.0/8"], heartbeat_s=None,
                              loglevel="INFO", celery_args=["--", "--max-memory-per-child", "1"])  # fmt: skip
    cmd, env = worker_command(args, Settings())
    joined = " ".join(cmd)
    assert "-A pipeline.transport.node.celery_app worker -Q fetch.edge1 --pool threads -c 6" in joined
    assert "solo" not in joined and cmd[-2:] == ["--max-memory-per-child", "1"]
    assert env["CRAWLFLEET_NODE"] == "edge1" and env["CRAWLFLEET_DNS_SERVERS"] == "127.0.0.1:5353"
    assert env["CRAWLFLEET_BROKER_URL"] == "amqp://u:p@127.0.0.1:5672/v"
    with pytest.raises(ValueError):
        worker_command(argparse.Namespace(**{**vars(args), "node": "bad name"}), Settings())


def test_worker_lowers_its_priority_before_it_becomes_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.transport import cli

    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(cli.os, "nice", lambda n: calls.append(("nice", n)))
    monkeypatch.setattr(cli.os, "execvpe", lambda f, cmd, env: calls.append(("exec", cmd[2])))
    args = argparse.Namespace(node="edge1", slots=2, config=None, broker_url=None, dns_server=None,
                              allow_network=None, heartbeat_s=None, loglevel="INFO", celery_args=None)  # fmt: skip
    monkeypatch.setenv("CRAWLFLEET_FLEET_NODE_NICE", "10")
    cli._cmd_worker(args)
    assert calls == [("nice", 10), ("exec", "celery")]  # exec keeps the priority
    calls.clear()
    monkeypatch.delenv("CRAWLFLEET_FLEET_NODE_NICE")
    cli._cmd_worker(args)
    assert calls == [("exec", "celery")]  # 0: left as it is
