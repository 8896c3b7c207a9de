"""Ground-truth properties of the testbed web."""

from __future__ import annotations

from pipeline.harness.testbed.model import Web
from pipeline.harness.testbed.truth import compute_truth
from pipeline.urls import normalize


def test_truth_properties() -> None:
    web = Web(20, 50, seed=0, port=8080)
    t = compute_truth(web)
    pages, fetch = set(t["pages"]), set(t["fetch_urls"])
    assert set(t["seeds"]) <= pages
    assert len(t["seeds"]) == 20
    assert pages <= fetch
    assert not pages & set(t["forbidden"])
    assert not pages & set(t["nofollow_only"])
    assert not any("/calendar/" in u for u in pages | fetch)
    assert all(normalize(u) == u for u in pages | fetch | set(t["forbidden"]))
    # every normal page is reachable
    assert all(web.url(i, web.page_path(m)) in pages for i in range(20) for m in range(50))
    # specials
    for k in range(3):
        assert web.url(0, f"/moved/{k}") in pages
        assert web.url(0, f"/r/{k}") in fetch and web.url(0, f"/r/{k}") not in pages
        assert web.url(0, f"/r2/{k}") in t["redirect_hops"]
        assert web.url(1, f"/missing/{k}") in fetch and web.url(1, f"/error/{k}") in fetch
        assert web.url(2, f"/private/{k}") in pages  # crawlfleet group allows it
        assert web.url(2, f"/agentonly/{k}") in t["forbidden"]
        assert web.url(5, f"/private/{k}") in t["forbidden"]
        assert web.url(8, f"/nf/{k}") in t["nofollow_only"]
        assert web.url(8, f"/mnf/{k}") in t["nofollow_only"]
    for i, path in (
        (4, "/slow"),
        (4, "/gzip"),
        (5, "/big"),
        (5, "/file.bin"),
        (6, "/latin1"),
        (8, "/metanf"),
    ):
        assert web.url(i, path) in pages
    assert web.url(0, "/loop/a") in fetch and web.url(0, "/loop/b") in t["redirect_hops"]
    assert len(t["robots_txt"]) == 7
    assert t["trap_prefix"] == "/calendar/"


def test_truth_depth_bound_and_determinism() -> None:
    web = Web(5, 200, seed=4)
    assert compute_truth(web) == compute_truth(Web(5, 200, seed=4))
    shallow = compute_truth(web, max_depth=1)
    assert set(shallow["seeds"]) <= set(shallow["pages"])
    assert len(shallow["pages"]) < len(compute_truth(web)["pages"])
    zero = compute_truth(web, max_depth=0)
    assert sorted(zero["pages"]) == sorted(zero["seeds"])


def test_single_host_web_has_everything() -> None:
    t = compute_truth(Web(1, 5))
    assert any(u.endswith("/moved/0") for u in t["pages"])
    assert t["nofollow_only"] and t["forbidden"]
