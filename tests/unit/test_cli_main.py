"""The ``crawlfleet`` command in-process: --version, settings, bench --help, demo's --out, seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main, version
from pipeline.embedded.start import read_seeds
from pipeline.harness.demo import MARKER, prepare_out
from pipeline.observe.errors import UsageError
from pipeline.observe.verdict import held_by_cap, nothing_due, zero_pages


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"crawlfleet {version()}"


def test_bench_help_lists_the_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    assert "crawlfleet bench NAME" in out and "local" in out and "fleet" in out


def test_settings_prints_each_value_with_its_source(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    config = tmp_path / "c.toml"
    config.write_text("[fetch]\nretries = 5\n")
    monkeypatch.setenv("CRAWLFLEET_DNS_TIMEOUT_S", "1.5")
    assert main(["settings", "--config", str(config), "--concurrency", "3"]) == 0
    out = capsys.readouterr().out
    assert "concurrency = 3  # flag" in out
    assert f"retries = 5  # file:{config}" in out
    assert "timeout_s = 1.5  # env:CRAWLFLEET_DNS_TIMEOUT_S" in out
    assert "max_redirects = 5  # default" in out


def test_a_settings_error_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["settings", "--config", str(tmp_path / "none.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.toml" in err and "Traceback" not in err


def test_demo_empties_only_its_own_or_an_empty_directory(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    prepare_out(fresh, force=False)
    (fresh / "crawl.db").write_text("old demo")
    prepare_out(fresh, force=False)  # its own: emptied again
    assert sorted(p.name for p in fresh.iterdir()) == [MARKER]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(UsageError, match="--force"):
        prepare_out(mine, force=False)
    assert (mine / "thesis.tex").exists()
    prepare_out(mine, force=True)
    assert not (mine / "thesis.tex").exists()
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        prepare_out(tmp_path / "f", force=True)


def test_seeds_file_lines_that_are_not_urls_are_counted_and_shown(tmp_path: Path) -> None:
    import io

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n# comment\n\nnot a url\nftp://x.test/\nb.test\nc d\nhttps://b.test/x\n")
    err = io.StringIO()
    assert read_seeds([], str(seeds), err=err) == ["http://a.test/", "https://b.test/x"]
    line = err.getvalue()
    assert line.count("\n") == 1 and "4 lines are not http(s) URLs" in line
    assert "line 4: 'not a url'" in line and "and 1 more" in line
    with pytest.raises(UsageError, match="'nope'"):
        read_seeds(["nope"], None)


def test_zero_pages_names_the_top_errors() -> None:
    why = zero_pages({"pages_fetched": 0, "errors_by_class": {"dns_nxdomain": 9, "ssrf_blocked": 2, "x": 1, "y": 1}})
    assert why == "crawl: no page fetched; top errors: dns_nxdomain=9, ssrf_blocked=2, x=1"
    assert zero_pages({"pages_fetched": 3}) == "" and zero_pages({"pages_fetched": 0, "interrupted": True}) == ""


def test_a_crawl_the_host_cap_left_nothing_to_fetch_is_no_failure() -> None:
    capped = {"pages_fetched": 0, "frontier": {"hosts_capped": 3}, "store": {"pending": 70}}
    assert held_by_cap(capped, cap=4) == ("crawl: nothing to fetch: 3 host(s) have taken "
                                          "scope.max_pages_per_host = 4 URLs and 70 URL(s) wait for a larger cap; raise it to go on")  # fmt: skip
    assert held_by_cap(capped, cap=0) == ""  # no cap: zero_pages says why
    assert held_by_cap({**capped, "pages_fetched": 1}, cap=4) == ""
    assert held_by_cap({**capped, "errors_by_class": {"dns_nxdomain": 1}}, cap=4) == ""  # errors: a failure
    assert held_by_cap({**capped, "store": {"pending": 0}}, cap=4) == ""


def test_nothing_due_is_said_only_of_a_recrawl_run_that_found_nothing_due() -> None:
    idle = {"pages_fetched": 0, "recrawl": {"requeued": 0, "scheduled": 72}, "store": {"pending": 0}}
    assert nothing_due(idle, continuous=False).endswith("run with --continuous to wait for the next one")
    assert nothing_due(idle, continuous=True).startswith("crawl: stopped before any URL came due")
    assert nothing_due({**idle, "recrawl": {}}, continuous=False) == ""  # no re-crawl: zero_pages says why
    assert nothing_due({**idle, "pages_fetched": 3}, continuous=False) == ""
    assert nothing_due({**idle, "errors_by_class": {"dns_nxdomain": 1}}, continuous=False) == ""  # a failure
    assert nothing_due({**idle, "store": {"pending": 4}}, continuous=False) == ""  # work left: not idle


@pytest.mark.parametrize("command", ["crawl", "dispatcher"])
def test_a_stop_file_without_a_continuous_run_is_one_line_and_exit_2(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop file only a continuous run reads would never stop anything: refused before anything is made."""
    monkeypatch.delenv("CRAWLFLEET_RECRAWL_CONTINUOUS", raising=False)
    out = tmp_path / "out"
    assert main([command, "--out", str(out), "--stop-file", str(tmp_path / "STOP"), "http://a.test/"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--stop-file" in err[0] and "add --continuous" in err[0] and not out.exists()


def test_a_stop_file_reaches_a_run_made_continuous_by_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CRAWLFLEET_RECRAWL_CONTINUOUS=1`` makes a run continuous without the flag: ``--stop-file`` must
    still reach it (it used to be dropped, and such a crawl could only be stopped by a signal)."""
    import argparse

    from pipeline.crawl.flags import check_stop_file, continuous_run
    from pipeline.settings import Settings

    settings = Settings().with_overrides({"recrawl": {"continuous": True}}, where="env")
    args = argparse.Namespace(continuous=False, stop_file="/tmp/STOP")
    check_stop_file(args, settings)  # no error: the run is continuous
    assert continuous_run(args, settings).recrawl.stop_file == "/tmp/STOP"
    assert continuous_run(argparse.Namespace(continuous=False, stop_file=None), Settings()) == Settings()
