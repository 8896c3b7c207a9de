"""S1's q counted in batches in the fleet's node choice (a deviation, docs/bench/s1.md): free download
slots in the hundreds no longer decide u on their own."""

from __future__ import annotations

from pipeline.dispatch.nodechoice import NodeLoad, choose_node
from pipeline.transport.fleet_nodes import batch_q


def test_batch_q_is_capped_by_idle_fetchers_times_t_and_by_the_heartbeat() -> None:
    assert batch_q(800, idle=8, t=40) == 320
    assert batch_q(100, idle=8, t=40) == 100
    assert batch_q(800, idle=0, t=40) == 0


def test_a_faster_node_wins_over_one_with_more_free_connections() -> None:
    """Raw q: the slow node's 1,000 free slots beat the fast node's p*s; in batches, p decides."""
    s, t = 10, 40
    slow = dict(node="slow", p=20.0, r=0, t=t)
    fast = dict(node="fast", p=100.0, r=0, t=t)
    raw = choose_node([NodeLoad(q=1500, **slow), NodeLoad(q=200, **fast)], s=s)  # type: ignore[arg-type]
    assert raw is not None and raw.node == "slow"
    loads = [NodeLoad(q=batch_q(1500, idle=4, t=t), **slow), NodeLoad(q=batch_q(200, idle=4, t=t), **fast)]  # type: ignore[arg-type]
    got = choose_node(loads, s=s)
    assert got is not None and got.node == "fast"
