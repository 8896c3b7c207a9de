"""pipeline.links.filtering.candidates: nofollow, scope, depth, traps, self-links, in-page dedup."""

from __future__ import annotations

from pipeline.links.extract import ExtractedPage, Link
from pipeline.links.filtering import Candidate, candidates, to_records
from pipeline.storage.base import UrlState
from pipeline.urls import Scope, TrapRules, fingerprint

SCOPE = Scope.build(["http://a.test/"], allowed_domains=("a.test",))
TRAPS = TrapRules(max_url_length=200, max_path_depth=5, max_repeated_segments=2)


def run(links: list[Link], *, depth: int = 0, max_depth: int = 3, meta_nofollow: bool = False,
        stats: dict[str, int] | None = None) -> list[Candidate]:
    page = ExtractedPage(links=links, meta_nofollow=meta_nofollow)
    return candidates("http://a.test/start", "http://a.test/final", depth, page,
                      scope=SCOPE, traps=TRAPS, max_depth=max_depth, stats=stats)


def test_keeps_in_scope_links_with_fields() -> None:
    [c] = run([Link("http://www.a.test/x", "anchor")], depth=1)
    assert c == Candidate("http://www.a.test/x", fingerprint("http://www.a.test/x"), "www.a.test", 2,
                          "http://a.test/final", "anchor")


def test_drops_each_kind_and_counts_reasons() -> None:
    stats: dict[str, int] = {}
    links = [
        Link("http://a.test/nf", "", nofollow=True),
        Link("http://other.test/x", ""),
        Link("http://a.test/final", ""),
        Link("http://a.test/start", ""),
        Link("http://a.test/" + "/".join("abcdef"), ""),
        Link("http://a.test/x/x/x", ""),
        Link("http://a.test/" + "y" * 300, ""),
        Link("http://a.test/ok", "first"),
        Link("http://a.test/ok", "second"),
    ]
    out = run(links, stats=stats)
    assert [(c.url, c.anchor) for c in out] == [("http://a.test/ok", "first")]
    assert stats == {"nofollow": 1, "out_of_scope": 1, "self": 2, "path_too_deep": 1,
                     "repeated_segments": 1, "url_too_long": 1, "duplicate": 1}


def test_nofollow_occurrence_does_not_hide_a_plain_one() -> None:
    out = run([Link("http://a.test/p", "", nofollow=True), Link("http://a.test/p", "plain")])
    assert [c.anchor for c in out] == ["plain"]


def test_meta_nofollow_and_depth_limit_drop_everything() -> None:
    assert run([Link("http://a.test/p", "")], meta_nofollow=True) == []
    assert run([Link("http://a.test/p", "")], depth=3, max_depth=3) == []
    assert len(run([Link("http://a.test/p", "")], depth=2, max_depth=3)) == 1


def test_to_records_gives_pending_rows_with_one_inlink() -> None:
    [rec] = to_records(run([Link("http://a.test/p", "")]))
    assert rec.state == UrlState.PENDING and rec.inlinks == 1 and rec.discovered_from == "http://a.test/final"
    assert rec.depth == 1 and rec.host == "a.test"
