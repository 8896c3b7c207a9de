"""S1 rule 3 over fetch *nodes*: the slave choice ``u = p*s + q - r`` the fleet dispatcher makes.

A node is one S1 "slave": ``p`` is the download rate of its last heartbeat (URLs/s), ``q`` its free
download slots from that heartbeat, ``r`` the URLs it was given this minute (reset at second 1 with the
quota counters, ``Admission.roll``), and ``t`` the batch it would be given now. Nodes with ``u > t`` are
candidates; the largest ``u`` wins (ties: the smallest name); no candidate means no. There is no
round-robin: a node that is slower (smaller p) or already given more this minute (larger r) loses to
one with more predicted free capacity. Pure: the caller supplies every figure.

One addition, a liveness guarantee S1 does not state: when no node has u > t, a node with *nothing
outstanding* (``drained``) still gets a batch (the drained node with the largest u). Without it a node
that has never had work (p = 0) and has few slots (q <= t, e.g. a node limited to a few connections)
would never be a candidate, and a fleet of such nodes would stall for ever.

A second addition: a node that has not yet reported a rate (``measured`` false: no success in any
heartbeat) is taken to be as fast as the mean of the measured nodes, until its own heartbeat says.
With its literal p = 0 a newcomer loses every choice to a node whose ``p*s`` has grown through the
minute and, while that node has an idle slot, gets work only from the fallback above: a two-node test
fleet was seen to give one node every batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.dispatch.admission import capacity


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node as the choice sees it; ``idle`` = it has a free virtual fetcher to take a batch."""

    node: str
    p: float
    q: int
    r: int
    t: int
    idle: bool = True
    drained: bool = False  # no batch outstanding at all
    measured: bool = True  # its p comes from a heartbeat that saw downloads (else the fleet's mean p)


@dataclass(frozen=True, slots=True)
class NodeChoice:
    node: str
    u: float
    t: int


def choose_node(loads: Iterable[NodeLoad], *, s: int) -> NodeChoice | None:
    """The idle node with the largest ``u = p*s + q - r`` among those with ``u > t`` (t >= 1), or None."""
    best: NodeChoice | None = None
    fallback: NodeChoice | None = None  # the drained node with the largest u, used only without a candidate
    loads = list(loads)
    rates = [n.p for n in loads if n.measured]
    mean_p = sum(rates) / len(rates) if rates else 0.0
    for n in loads:
        if not n.idle or n.t < 1:
            continue
        u = capacity(p=n.p if n.measured else max(n.p, mean_p), q=n.q, r=n.r, s=s)
        if u > n.t and (best is None or u > best.u or (u == best.u and n.node < best.node)):
            best = NodeChoice(n.node, u, n.t)
        if n.drained and (fallback is None or u > fallback.u or (u == fallback.u and n.node < fallback.node)):
            fallback = NodeChoice(n.node, u, n.t)
    return best if best is not None else fallback
