"""The books of pages (and hosts) whose parse killed parser processes, for fetch processes
(pipeline/embedded/fetchproc.py) and for the fleet's extract job (pipeline/transport/links/quarantine.py),
and the restart budget of the helpers such pages kill (pipeline/embedded/childproc.py)."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.logic import Quarantined, read_quarantine
from pipeline.embedded.childproc import RestartBudget
from pipeline.embedded.fetchproc import HostilePages
from pipeline.links import guard
from pipeline.storage.sqlite import SqliteStore
from pipeline.transport.links.quarantine import META_PREFIX, LinkQuarantine


def test_fetch_processes_set_a_page_aside_at_two_strikes_and_a_host_at_its_limit() -> None:
    book = HostilePages(host_limit=2)
    assert book.blame("http://h.test/a", "x") == 1 and book.snapshot() == ({}, {}) and book.version == 0
    book.blame("http://h.test/a", "x")
    assert set(book.snapshot()[0]) == {"http://h.test/a"} and book.snapshot()[1] == {} and book.version == 1
    book.blame("http://h.test/a", "x")  # a third death of a page already aside changes nothing
    assert book.version == 1
    book.blame("http://h.test/b", "x")
    book.blame("http://h.test/b", "x")
    assert book.snapshot()[1] == {"h.test": guard.host_error(2)} and book.version == 2
    assert HostilePages(host_limit=0).host_limit == 0


def test_the_quarantine_file_names_pages_and_hosts() -> None:
    q = Quarantined(frozenset({"http://a.test/x"}), frozenset({"b.test"}))
    assert "http://a.test/x" in q and "http://b.test/anything" in q and "http://a.test/y" not in q
    assert "http://c.test/" not in Quarantined()


def _dead_task(guard_dir: Path, name: str, url: str) -> None:
    """What a task that died inside the parser leaves: its marker, naming the page in hand."""
    guard_dir.mkdir(parents=True, exist_ok=True)
    raw = url.encode()
    (guard_dir / f"{name}.marker").write_bytes(guard._HEAD.pack(0, len(raw)) + raw)


def test_the_link_service_lists_a_host_once_enough_of_its_pages_killed_tasks(tmp_path: Path) -> None:
    segments = tmp_path / "segs"
    db = tmp_path / "crawl.db"
    SqliteStore(db).close()
    q = LinkQuarantine(segments, store=f"sqlite:{db}", cpu_limit_s=1.0, host_limit=2)
    for round_ in range(2):  # two failed rounds, each with two dead tasks on two pages of h.test
        _dead_task(segments / ".guard", f"a{round_}", "http://h.test/a")
        _dead_task(segments / ".guard", f"b{round_}", "http://h.test/b")
        if round_ == 0:
            _dead_task(segments / ".guard", "c0", "http://other.test/c")
        got = q.blame()
    assert sorted(got) == ["http://h.test/a", "http://h.test/b"] and q.quarantined == 2
    lines = [json.loads(line) for line in (segments / ".quarantine.jsonl").read_text().splitlines()]
    assert [x.get("url", x.get("host")) for x in lines] == ["http://h.test/a", "http://h.test/b", "h.test"]
    listed = read_quarantine(str(segments / ".quarantine.jsonl"))
    assert "http://h.test/new" in listed and "http://other.test/c" not in listed  # other.test: one strike
    with SqliteStore(db) as store:
        assert store.get_meta(META_PREFIX + "http://h.test/a") is not None
    assert list((segments / ".guard").glob("*.marker")) == []


def test_the_restart_budget_counts_only_deaths_no_page_is_blamed_for_per_window() -> None:
    now = [0.0]
    budget = RestartBudget(deaths=2, window_s=60.0, clock=lambda: now[0])
    for _ in range(10):
        budget.died(blamed=True)  # a hostile page in hand: its strikes bound these
    assert budget.may_restart() and budget.total == 10
    budget.died()
    now[0] = 30.0
    budget.died()
    assert not budget.may_restart()  # two deaths of itself within a minute
    now[0] = 61.0
    assert budget.may_restart()  # the first has left the window
    now[0] = 89.0
    budget.died()
    assert not budget.may_restart()


def test_the_link_services_strikes_survive_its_restart(tmp_path: Path) -> None:
    """One death of a page before a restart and one after make two strikes: the page is set aside. Before,
    strikes lived in the service's memory, so a restart between the deaths cost one more failed round."""
    segments = tmp_path / "segs"
    db = tmp_path / "crawl.db"
    _dead_task(segments / ".guard", "t1", "http://h.test/a")
    assert LinkQuarantine(segments, store=f"sqlite:{db}", cpu_limit_s=1.0).blame() == []
    with open(segments / ".strikes.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"url": "http://h.test/torn"')  # a write the kill cut short counts nothing
    again = LinkQuarantine(segments, store=f"sqlite:{db}", cpu_limit_s=1.0)  # the service restarted
    assert again.strikes == {"http://h.test/a": 1}
    _dead_task(segments / ".guard", "t2", "http://h.test/a")
    assert again.blame() == ["http://h.test/a"]
    assert "http://h.test/a" in read_quarantine(str(segments / ".quarantine.jsonl"))
    # the torn line did not swallow the strike written after it
    assert LinkQuarantine(segments, store=f"sqlite:{db}", cpu_limit_s=1.0).strikes == {"http://h.test/a": 2}
