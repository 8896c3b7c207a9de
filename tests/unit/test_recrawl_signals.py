"""Per-host trust in change signals (pipeline/frontier/signals.py and the Recrawler that applies it): a host
whose 304s hid a change gets full GETs, one that ignores validators plain GETs, an honest one conditional
GETs with an audit now and then; sitemap lastmods that proved right let listed pages wait for them. Pure,
with a real SQLite store for the Recrawler."""

from __future__ import annotations

from pathlib import Path

from fetchers.records import FetchResult, UrlTask
from pipeline.crawl.revisits import Recrawler
from pipeline.frontier import signals
from pipeline.frontier.signals import (
    AUDIT_EVERY,
    AUDIT_EVERY_TRUSTED,
    CLEAN_AUDITS,
    CONDITIONAL,
    FULL,
    PLAIN,
    HostSignals,
    validators_for,
)
from pipeline.settings.recrawl import RecrawlSettings
from pipeline.storage.base import Outcome, Revisit, UrlState
from pipeline.storage.sqlite import SqliteStore
from pipeline.urls import fingerprint

PREV = Revisit(0.0, 10.0, etag='"a"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT", digest="d1", fetches=3,
               fetched_at=100.0)  # fmt: skip


def seen(s: HostSignals, *, status: int, etag: str = '"a"', digest: str = "d1", changed: bool = False,
         prev: Revisit = PREV, lastmod: bool = False) -> None:  # fmt: skip
    signals.observe(s, prev, status=status, etag=etag, last_modified=PREV.last_modified, digest=digest,
                    changed=changed, lastmod_asked=lastmod)  # fmt: skip


def test_modes_follow_what_the_host_proved() -> None:
    honest = HostSignals()
    seen(honest, status=304)
    seen(honest, status=200, etag='"b"', digest="d2", changed=True)  # new content, new ETag
    assert honest.mode == CONDITIONAL and honest.not_modified == 1 and honest.stale_validators == 0
    liar = HostSignals()
    seen(liar, status=200, etag='"a"', digest="d2", changed=True)  # the content changed under the same ETag
    assert liar.mode == FULL
    deaf = HostSignals()
    for _ in range(7):
        seen(deaf, status=200)  # the stored bytes again, validators sent
    assert deaf.mode == CONDITIONAL
    seen(deaf, status=200)
    assert deaf.mode == PLAIN and deaf.ignored == 8
    seen(deaf, status=304)
    assert deaf.mode == CONDITIONAL  # it does answer 304 after all
    assert HostSignals.from_dict(liar.as_dict()) == liar and HostSignals.from_dict({"ignored": "x"}) == HostSignals()


def test_an_audit_is_not_counted_as_ignored_and_first_fetches_tell_nothing() -> None:
    s = HostSignals()
    audit = Revisit(0.0, 10.0, etag='"a"', digest="d1", fetches=AUDIT_EVERY - 1, fetched_at=1.0)
    seen(s, status=200, prev=audit)  # the audit found the stored bytes under the stored ETag: honest
    seen(s, status=200, prev=Revisit(0.0, 0.0))  # no stored copy: nothing to judge
    assert s == HostSignals(audits_clean=1)


def test_audits_thin_out_once_a_host_proved_honest() -> None:
    fresh, proved = HostSignals(), HostSignals(audits_clean=CLEAN_AUDITS)
    pages = [Revisit(0.0, 1.0, etag='"a"', fetches=k) for k in range(AUDIT_EVERY_TRUSTED)]
    assert sum(validators_for(p, fresh) == ("", "") for p in pages) == AUDIT_EVERY_TRUSTED // AUDIT_EVERY
    assert sum(validators_for(p, proved) == ("", "") for p in pages) == 1


def test_validators_for_each_mode_and_the_audit() -> None:
    assert validators_for(PREV, None) == (PREV.etag, PREV.last_modified)
    assert validators_for(PREV, HostSignals(stale_validators=1)) == ("", "")
    assert validators_for(PREV, HostSignals(ignored=9)) == ("", "")
    audit = Revisit(0.0, 10.0, etag='"a"', fetches=AUDIT_EVERY - 1)
    assert validators_for(audit, HostSignals()) == ("", "")
    sent = [validators_for(Revisit(0.0, 1.0, etag='"a"', fetches=k), None) for k in range(AUDIT_EVERY * 4)]
    assert sum(v == ("", "") for v in sent) == 4  # one re-fetch in AUDIT_EVERY


def test_lastmod_trust() -> None:
    s = HostSignals()
    for k in range(5):
        seen(s, status=200, etag=f'"{k}"', digest=f"n{k}", changed=k != 0, lastmod=True)
    assert s.lastmod_due == 5 and s.lastmod_changed == 4 and s.skips
    seen(s, status=304, lastmod=True)
    seen(s, status=304, lastmod=True)
    assert not s.skips  # 4 of 7: lastmod says "changed" too often when nothing did


def result(url: str, at: float, body: bytes, etag: str) -> FetchResult:
    return FetchResult(url, fingerprint(url), 0, final_url=url, status=200, content_type="text/html", body=body,
                       body_bytes=len(body), headers={"etag": etag}, fetched_at=at)  # fmt: skip


def test_the_recrawler_stops_sending_validators_to_a_host_whose_304s_hid_a_change(tmp_path: Path) -> None:
    rc = Recrawler(RecrawlSettings(enabled=True, initial_interval_s=10.0, min_interval_s=1.0, max_interval_s=100.0),
                   SqliteStore(tmp_path / "crawl.db"))  # fmt: skip
    url = "http://liar.test/p"
    t = 100.0
    out, _ = rc.on_outcome(result(url, t, b"<p>one</p>", '"fixed"'), Outcome(url, fingerprint(url), UrlState.DONE, 200, t))
    assert out.revisit is not None
    rc.note_pending([_record(url, out.revisit)])
    task = UrlTask(url, fingerprint(url))
    rc.decorate([task])
    assert task.etag == '"fixed"'  # trusted until proved otherwise
    out, _ = rc.on_outcome(result(url, t + 10, b"<p>two</p>", '"fixed"'),
                           Outcome(url, fingerprint(url), UrlState.DONE, 200, t + 10))  # fmt: skip
    assert out.revisit is not None
    rc.note_pending([_record(url, out.revisit)])
    task = UrlTask(url, fingerprint(url))
    rc.decorate([task])
    assert task.etag == "" and task.last_modified == ""  # a full GET from now on
    assert rc.summary()["signals"]["hosts_by_mode"] == {FULL: 1}  # type: ignore[index]
    off = Recrawler(RecrawlSettings(enabled=True, signal_trust=False), SqliteStore(tmp_path / "off.db"))
    off.note_pending([_record(url, out.revisit)])
    task = UrlTask(url, fingerprint(url))
    off.decorate([task])
    assert task.etag == '"fixed"'  # trust off: validators whatever the host did


def _record(url: str, rv: Revisit):  # type: ignore[no-untyped-def]
    from pipeline.storage.base import UrlRecord

    return UrlRecord(url, fingerprint(url), "liar.test", 0, revisit=rv)


def test_a_fleet_dispatcher_reads_the_records_the_update_jobs_counted(tmp_path: Path) -> None:
    """The dispatcher plans nothing itself: the host's record comes from the crawl db (jobs/recrawl.py)."""
    import json

    from jobs.recrawl import HOST_META, SIGNAL_PREFIX

    store = SqliteStore(tmp_path / "crawl.db")
    store.put_meta(HOST_META + "liar.test", json.dumps({"counts": {SIGNAL_PREFIX + "stale_validators": 1}}))
    rc = Recrawler(RecrawlSettings(enabled=True), store)
    url = "http://liar.test/p"
    rc.note_pending([_record(url, PREV), _record("http://honest.test/p", PREV)])
    liar, honest = UrlTask(url, fingerprint(url)), UrlTask("http://honest.test/p", fingerprint("http://honest.test/p"))
    rc.decorate([liar, honest])
    assert liar.etag == "" and honest.etag == PREV.etag
