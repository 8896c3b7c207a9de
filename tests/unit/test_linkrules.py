"""The crawl's link rules as the dispatcher publishes them to the link jobs (pipeline/transport/links/rules.py)."""

from __future__ import annotations

import json

from pipeline.transport.links.rules import CrawlLinkRules
from pipeline.urls import Scope, TrapRules


def test_rules_round_trip_and_carry_the_inlink_choice_to_the_update_job() -> None:
    rules = CrawlLinkRules.of_crawl(Scope(domains=frozenset({"b.test", "a.test"})), TrapRules(), max_depth=3,
                                    count_inlinks=False)  # fmt: skip
    back = CrawlLinkRules.from_json(rules.to_json())
    assert back == rules and back.domains == ("a.test", "b.test")
    args = back.job_args(store="hbase", batch_size=500, lru_size=10)
    assert "--no-inlinks" in args.update()
    assert (
        "--no-inlinks"
        not in CrawlLinkRules.of_crawl(Scope(domains=frozenset()), TrapRules(), max_depth=3)
        .job_args(store="hbase", batch_size=500, lru_size=10)
        .update()
    )


def test_rules_written_before_the_choice_existed_count_inlinks() -> None:
    old = json.loads(CrawlLinkRules.of_crawl(Scope(domains=frozenset()), TrapRules(), max_depth=2).to_json())
    del old["count_inlinks"]
    assert CrawlLinkRules.from_json(json.dumps(old)).count_inlinks is True
