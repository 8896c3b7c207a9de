"""Structured logs (one line per event, JSON option) and the progress display over CrawlStats."""

from __future__ import annotations

import argparse
import io
import json
import logging

import pytest

from fetchers.records import FetchResult
from pipeline.observe.logs import add_arguments, event, setup_from_args, setup_logging
from pipeline.observe.progress import CrawlProgress, human_bytes, task_progress
from pipeline.observe.stats import CrawlStats


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_root_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _page(n: int = 1, wire: int = 1000) -> FetchResult:
    return FetchResult(url=f"http://a.test/{n}", url_id=n, depth=0, status=200, wire_bytes=wire)


def test_json_logs_are_one_object_per_line_with_fields() -> None:
    out = io.StringIO()
    setup_logging(json_lines=True, stream=out)
    log = logging.getLogger("crawlfleet.test")
    event(log, "batch.done", fetcher="f1", n=64)
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        log.exception("multi\nline")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["msg"] == "batch.done" and first["fetcher"] == "f1" and first["n"] == 64
    assert first["level"] == "INFO" and first["logger"] == "crawlfleet.test" and first["ts"].endswith("Z")
    assert second["msg"] == "multi\nline" and "ValueError" in second["exc"]


def test_text_logs_are_one_line_key_value() -> None:
    out = io.StringIO()
    setup_logging(level="DEBUG", stream=out)
    log = logging.getLogger("crawlfleet.test")
    event(log, "fetch", url="http://a.test/ x", secs=0.25, level=logging.DEBUG)
    log.warning("two\nlines")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert " DEBUG crawlfleet.test fetch " in lines[0]
    assert 'url="http://a.test/ x"' in lines[0] and "secs=0.25" in lines[0]
    assert lines[1].endswith("two\\nlines")


def test_levels_filter_and_setup_is_idempotent() -> None:
    out = io.StringIO()
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--log-level", "warning", "--log-json"])
    setup_from_args(args, stream=out)
    setup_from_args(args, stream=out)  # a second call replaces, not duplicates, the handler
    log = logging.getLogger("crawlfleet.test")
    log.info("hidden")
    log.warning("shown")
    assert [json.loads(x)["msg"] for x in out.getvalue().splitlines()] == ["shown"]


def test_progress_bar_shows_rates_queue_errors_and_eta() -> None:
    clock = Clock()
    stats = CrawlStats(clock=clock)
    out = Tty()
    with CrawlProgress(stats, total=1000, stream=out, clock=clock, smoothing=1.0) as bar:
        assert bar.mode == "bar"
        for i in range(100):
            stats.on_result(_page(i, wire=2048))
        stats.on_result(FetchResult(url="http://a.test/e", url_id=0, depth=0, error_class="timeout"))
        stats.set_queue(77)
        clock.t = 1.0
        bar.update()
        assert bar.pages_per_s == pytest.approx(101)
        assert bar.eta_s() == pytest.approx((1000 - 101) / 101)
        fields = bar.postfix()
    text = out.getvalue()
    assert "101/1000" in text and "queue=77" in text and "err=1" in text and "eta=" in text
    assert fields["bw"] == "200.0 KiB/s"


def test_progress_logs_when_not_a_terminal() -> None:
    clock = Clock()
    stats = CrawlStats(clock=clock)
    logs = io.StringIO()
    setup_logging(json_lines=True, stream=logs)
    with CrawlProgress(stats, stream=io.StringIO(), clock=clock, log_every_s=10) as bar:
        assert bar.mode == "log"
        stats.on_result(_page())
        clock.t = 5.0
        bar.update()  # too soon for a line
        clock.t = 10.0
        bar.update()
    events = [json.loads(x) for x in logs.getvalue().splitlines()]
    assert [e["msg"] for e in events] == ["progress", "progress"]  # one periodic, one on close
    assert events[0]["pages"] == 1 and "eta_s" not in events[0]  # no total: no ETA


def test_progress_off_and_helpers() -> None:
    stats = CrawlStats()
    out = Tty()
    with CrawlProgress(stats, mode="off", stream=out) as bar:
        bar.update()
    assert out.getvalue() == ""
    with pytest.raises(ValueError):
        CrawlProgress(stats, mode="loud")
    assert human_bytes(512) == "512 B" and human_bytes(1536) == "1.5 KiB" and human_bytes(3 * 2**30) == "3.0 GiB"
    assert list(task_progress(range(3), stream=io.StringIO())) == [0, 1, 2]
    bar_out = Tty()
    assert list(task_progress(range(3), total=3, stream=bar_out, desc="job")) == [0, 1, 2]
    assert "3/3" in bar_out.getvalue()
