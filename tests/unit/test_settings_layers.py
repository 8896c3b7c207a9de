"""Settings: where each value came from, and one clear SettingsError for every kind of bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pipeline.settings import SettingsError, arg_type, check_value, load_settings, load_settings_traced


def test_each_value_says_which_layer_set_it(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[fetch]\nretries = 4\nconcurrency = 9\n[dns]\nservers = ["127.0.0.1:53"]\n')
    loaded = load_settings_traced(
        config,
        environ={"CRAWLFLEET_FETCH_CONCURRENCY": "7", "CRAWLFLEET_BROKER_URL": "amqp://x//"},
        overrides={"fetch": {"concurrency": 5, "user_agent": None}, "scope": {"max_depth": 3}},
        remembered={"scope": {"max_pages": 100, "max_depth": 9}, "fetch": {"retries": 1}},
    )
    s, src = loaded.settings, loaded.sources
    assert (s.fetch.concurrency, src["fetch.concurrency"]) == (5, "flag")
    assert (s.fetch.retries, src["fetch.retries"]) == (4, f"file:{config}")
    assert (s.scope.max_pages, src["scope.max_pages"]) == (100, "crawl-dir")
    assert (s.scope.max_depth, src["scope.max_depth"]) == (3, "flag")
    assert (s.fleet.broker_url, src["fleet.broker_url"]) == ("amqp://x//", "env:CRAWLFLEET_BROKER_URL")
    assert s.dns.servers == ("127.0.0.1:53",)
    assert src["fetch.user_agent"] == "default"  # a flag not given (None) is no layer


@pytest.mark.parametrize(
    ("toml", "names"),
    [
        ("[fetch\n", ["not valid TOML"]),
        ("[fetc]\nx = 1\n", ["[fetc]", "fetch, politeness"]),
        ("[fetch]\nconcurency = 1\n", ["fetch.concurency", "concurrency"]),
        ("[fetch]\nconcurrency = 'many'\n", ["fetch.concurrency", "'many'", "an integer"]),
        ("[fetch]\nconcurrency = 0\n", ["fetch.concurrency", ">= 1", "got 0"]),
        ("[fetch]\nkeep_body = 'maybe'\n", ["fetch.keep_body", "true or false"]),
        ("[dns]\nservers = ['dns.example']\n", ["dns.servers", "'dns.example'"]),
        ("[security]\nallow_networks = ['10.0.0.0/40']\n", ["security.allow_networks", "10.0.0.0/40"]),
        ("[scope]\ndeny_regex = ['(']\n", ["scope.deny_regex", "regular expression"]),
        ("[store]\nkind = 'mysql'\n", ["store.kind", "sqlite, hbase"]),
        ("[scope]\nsort_query = true\n", ["scope.sort_query", "not implemented"]),
        ("[dispatch]\nn_min = 64\nn_max = 8\n", ["dispatch.n_max", "64"]),
        ("fetch = 3\n", ["[fetch] must be a table"]),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key(tmp_path: Path, toml: str, names: list[str]) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(toml)
    with pytest.raises(SettingsError) as info:
        load_settings(config, environ={})
    message = str(info.value)
    assert "\n" not in message and str(config) in message, message
    for text in names:
        assert text in message, message


def test_a_missing_file_and_a_bad_environment_value_are_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="nope.toml"):
        load_settings(tmp_path / "nope.toml", environ={})
    with pytest.raises(SettingsError, match=r"env:CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S.*>= 0"):
        load_settings(environ={"CRAWLFLEET_POLITENESS_MIN_HOST_DELAY_S": "-1"})


def test_environment_text_is_parsed_to_the_field_type() -> None:
    s = load_settings(environ={"CRAWLFLEET_FETCH_KEEP_BODY": "off", "CRAWLFLEET_DNS_SERVERS": "127.0.0.1:53, [::1]:53"})
    assert s.fetch.keep_body is False and s.dns.servers == ("127.0.0.1:53", "[::1]:53")


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("fetch.concurrency", "0", ">= 1"),
        ("fetch.concurrency", "-3", ">= 1"),
        ("fetch.concurrency", "2.5", "an integer"),
        ("politeness.min_host_delay_s", "-0.1", ">= 0"),
        ("scope.max_pages", "-1", ">= 0"),
        ("dns.servers", "127.0.0.1:99999", "IP address"),
        ("dns.servers", "localhost:53", "IP address"),
        ("security.allow_networks", "nonsense", "CIDR"),
        ("dispatch.heartbeat_s", "0", "> 0"),
    ],
)
def test_a_flag_obeys_the_rule_a_file_does(key: str, text: str, expected: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=expected):
        arg_type(key)(text)


def test_good_flag_values_pass() -> None:
    assert arg_type("fetch.concurrency")("4") == 4
    assert arg_type("dns.servers")("[::1]:5353") == "[::1]:5353"
    assert arg_type("security.allow_networks")("127.0.0.0/8") == "127.0.0.0/8"
    assert check_value("fetch.processes", -1) is None and check_value("scope.max_pages", 0) is None
    assert check_value("fleet.node_nice", 19) is None  # a nice value: 0-19
    assert check_value("fleet.node_nice", 20) is not None and check_value("fleet.node_nice", -1) is not None


def test_recrawl_settings_are_checked_where_they_are_read() -> None:
    """A bad re-crawl override or share is a usage error at load time, not when the crawl starts."""
    from pipeline.settings import check_value

    assert check_value("recrawl.overrides", ("*.example.org=60:86400", "re:/news/=30:30")) is None
    for bad in ("x=5", "host=0:10", "host=10:5", "re:(=1:2", "=1:2"):
        assert check_value("recrawl.overrides", (bad,)) is not None, bad
    assert check_value("recrawl.recrawl_share", 1.5) is not None
    assert check_value("recrawl.simhash_bits", 65) is not None
    assert check_value("recrawl.min_interval_s", 0.0) is not None
