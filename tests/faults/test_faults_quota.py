"""Fault trial on S1's quota (pipeline.harness.faults.quota_trial): the fleet dispatcher SIGKILLed while a
quota minute is half used and resumed within the same minute. Judged from the testbed's access log:
the URLs requested per minute never exceed the service's quota; and, as every fault trial, no page
lost and no repeat (the dispatcher fetches nothing, so nothing is excused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.harness.faults.bed import Bed, TrialPlan
from pipeline.harness.faults.quota_trial import quota_trial
from pipeline.harness.faults.services import broker_vhost
from pipeline.transport.dispatcher.grants import granted_this_minute
from tests.faults.verdict import check_fetches_nothing

pytestmark = [pytest.mark.faults, pytest.mark.integration]

PER_S = 3.0  # 180 URLs a minute: the bed's ~240 URLs need two minutes of quota


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with broker_vhost() as url:
        yield url


ATTEMPTS = 3  # a resume that lands in the next minute tests nothing: the trial is run again


@pytest.mark.parametrize("seed", [1])
def test_dispatcher_sigkill_mid_quota_minute_keeps_quota(fault_bed: Bed, vhost: str, tmp_path: Path,
                                                         record: Callable[..., Any], seed: int) -> None:  # fmt: skip
    """The trial is what it is for only when the resumed dispatcher issues its first batch in the minute
    of the kill (the event, from its journal); one that did not is run again, not judged on the clock."""
    plan = TrialPlan.seeded("dispatcher", "kill-quota", seed, lo=0.4, hi=0.6)  # the seed's stream: "kill-quota"
    for attempt in range(ATTEMPTS):
        rec = quota_trial(fault_bed, vhost, tmp_path / f"try{attempt}", plan, per_s=PER_S)
        q = rec["quota"]
        assert q["max_minute"] <= q["per_minute"], q  # S1's cap holds whichever minute the resume landed in
        if q["resumed_in_fault_minute"]:
            break
    else:
        pytest.fail(f"{ATTEMPTS} resumes all landed past the kill's minute: the trial never tested its point")
    record(rec)
    check_fetches_nothing(rec)


def test_grants_of_a_killed_dispatcher_are_read_back(tmp_path: Path) -> None:
    """The restore the trial above depends on: the current minute's ``issue`` lines, per fetcher; a line
    torn by the kill (that batch was never sent) and other minutes' lines do not count."""
    events = tmp_path / "fleet-events.jsonl"
    events.write_text(
        '{"t": 119.5, "ev": "issue", "vfid": "a#0", "n": 7}\n'  # the minute before
        '{"t": 120.0, "ev": "issue", "vfid": "a#0", "n": 5}\n'
        '{"t": 130.0, "ev": "done", "serial": 2}\n'
        '{"t": 140.0, "ev": "issue", "vfid": "b#1", "n": 3}\n'
        '{"t": 150.0, "ev": "issue", "vfid": "a#0", "n": 2}\n'
        '{"t": 151.0, "ev": "issue", "vfid": "b#1", "n"'  # torn
    )
    assert granted_this_minute(events, 170.0) == {"a#0": 7, "b#1": 3}
    assert granted_this_minute(events, 180.0) == {}
    assert granted_this_minute(tmp_path / "absent.jsonl", 170.0) == {}
