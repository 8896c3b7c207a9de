"""S1 rule 3 over fleet nodes: u = p*s + q - r, candidates u > t, largest u wins, no round-robin."""

from __future__ import annotations

from pipeline.dispatch.nodechoice import NodeLoad, choose_node
from pipeline.transport.dispatcher.nodes import FleetNodes
from pipeline.transport.wire.messages import NodeHeartbeat


def test_largest_u_above_t_wins() -> None:
    loads = [
        NodeLoad("a", p=10, q=5, r=0, t=20),
        NodeLoad("b", p=50, q=0, r=0, t=20),
        NodeLoad("c", p=1, q=0, r=0, t=20),
    ]
    got = choose_node(loads, s=2)  # u = 25, 100, 2
    assert got is not None and (got.node, got.u, got.t) == ("b", 100, 20)


def test_u_must_exceed_t_strictly_and_r_counts_against() -> None:
    assert choose_node([NodeLoad("a", p=0, q=20, r=0, t=20)], s=1) is None  # u == t
    assert choose_node([NodeLoad("a", p=10, q=30, r=25, t=20)], s=1) is None  # u = 15 < 20
    got = choose_node([NodeLoad("a", p=10, q=30, r=25, t=20)], s=2)  # the second grows p*s: u = 25
    assert got is not None and got.node == "a"


def test_busy_nodes_are_no_candidates_and_ties_go_to_the_smallest_name() -> None:
    loads = [NodeLoad("b", 0, 50, 0, 8), NodeLoad("a", 0, 50, 0, 8), NodeLoad("c", 0, 99, 0, 8, idle=False)]
    got = choose_node(loads, s=1)
    assert got is not None and got.node == "a"


def _hb(
    node: str, *, rate: float, free: int, slots: int = 2, inc: str = "i1", sent: float = 1.0
) -> NodeHeartbeat:
    return NodeHeartbeat(node, inc, sent, 5, 1, rate, free, slots, 0)


def test_fleet_nodes_choose_from_heartbeats_and_the_minutes_grants() -> None:
    fleet = FleetNodes()
    up = fleet.heard(_hb("fast", rate=400.0, free=100), now=0.0)
    assert up.event == "node_up" and up.reregister == ("fast#0", "fast#1")
    fleet.heard(_hb("slow", rate=100.0, free=100), now=0.0)
    given: dict[str, int] = {}
    picks = []
    for _ in range(6):  # every pick is the node with the most predicted free capacity
        picked = fleet.choose(s=1, t_of=lambda v: 64, r_of=lambda v: given.get(v, 0))
        if picked is None:
            break
        node, vfid = picked
        picks.append(node.name)
        given[vfid] = given.get(vfid, 0) + 64
        fleet.busy.pop(vfid, None)  # the batch came back at once: only r holds the node back
    # fast: u = 500 - r; slow: u = 200 - r. fast takes batches while its u stays the largest.
    assert picks[:4] == ["fast", "fast", "fast", "fast"], picks
    assert "slow" in picks


def test_fleet_nodes_membership() -> None:
    fleet = FleetNodes()
    fleet.heard(_hb("n", rate=1.0, free=4), now=0.0)
    assert fleet.heard(_hb("n", rate=2.0, free=4, sent=2.0), now=1.0).event == ""
    assert fleet.nodes["n"].p == 2.0 and fleet.nodes["n"].successes == 5
    assert [n.name for n in fleet.silent(5.0, 4.0)] == ["n"]
    assert fleet.live() == []
    assert fleet.heard(_hb("n", rate=2.0, free=4, sent=3.0), now=6.0).event == "node_back"
    again = fleet.heard(_hb("n", rate=2.0, free=4, slots=3, inc="i2"), now=7.0)
    assert again.event == "node_up" and again.restarted and again.reregister == ("n#0", "n#1", "n#2")
    fleet.busy["n#0"] = 7
    assert fleet.idle_slots() == 2


def test_the_summary_says_when_there_is_no_quota() -> None:
    from pipeline.transport.dispatcher.state import quota_line

    assert quota_line("", None) == "unlimited (no quota file)"
    assert quota_line("q.toml", 200.0) == "200 URLs/s from q.toml"
    assert "refused" in quota_line("q.toml", None)


def test_a_drained_node_gets_a_batch_when_no_node_has_u_above_t() -> None:
    # p = 0 (no work yet) and q = 2 (two connections): u = 2 <= t = 32, so S1 alone would stall for ever.
    loads = [NodeLoad("a", 0.0, 2, 0, 32, drained=True), NodeLoad("b", 0.0, 8, 0, 32, drained=True)]
    got = choose_node(loads, s=1)
    assert got is not None and got.node == "b"  # the largest u among the drained
    assert choose_node([NodeLoad("a", 0.0, 2, 0, 32, drained=False)], s=1) is None  # busy: S1's no
    both = [NodeLoad("a", 0.0, 64, 0, 32), NodeLoad("b", 0.0, 8, 0, 32, drained=True)]
    got = choose_node(both, s=1)
    assert got is not None and got.node == "a"  # a real candidate wins over the fallback


def test_a_node_without_a_measured_rate_counts_as_the_fleets_mean() -> None:
    """Late in the minute a working node's p*s dwarfs a newcomer's q; the newcomer takes the mean p."""
    busy = NodeLoad("a", p=40, q=4, r=600, t=64)  # u = 40*30 + 4 - 600 = 604
    new = NodeLoad("b", p=0, q=4, r=0, t=64, measured=False)  # literal u = 4; as the mean (40): 1,204
    got = choose_node([busy, new], s=30)
    assert got is not None and got.node == "b"
    # A node measured as slow keeps its own rate.
    slow = NodeLoad("b", p=0, q=4, r=0, t=64, measured=True)
    got = choose_node([busy, slow], s=30)
    assert got is not None and got.node == "a"
    # With no measured node at all, S1's literal u stands (and the drained fallback keeps a fleet going).
    assert choose_node([NodeLoad("b", p=0, q=4, r=0, t=64, measured=False)], s=30) is None
