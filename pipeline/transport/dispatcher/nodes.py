"""The fleet dispatcher's node table: membership by heartbeat (incarnations, silence = dead) and S1's
slave choice over the live nodes (``pipeline.dispatch.nodechoice``). No I/O: the service acts on what
these methods return (register fetchers, purge queues, write events).

Each node is ``slots`` virtual fetchers ``<node>#<i>`` (S3's sizing and the frontier's host leases work
per fetcher); a virtual fetcher is busy from the issue of its batch until that batch's report. The
choice is per node, from the node's own heartbeat: p = its measured rate, q = its free slots, r = the
URLs given to its fetchers this minute, t = the batch its first idle fetcher would ask for now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.nodechoice import NodeChoice, NodeLoad, choose_node
from pipeline.transport.dispatcher.state import Node
from pipeline.transport.wire.messages import NodeHeartbeat, lease_epoch, same_process


@dataclass(frozen=True, slots=True)
class Heard:
    """What one heartbeat changed: ``event`` is "node_up" (a new node or a restarted process:
    ``reregister`` lists every virtual fetcher to (re-)register, the old incarnation's too, and
    ``restarted`` says whether its queue must be purged), "node_back" (a dead node spoke again, its
    lease lapsed or not), "node_lapsed" (a live node's lease lapsed: it hands back, unfetched, every
    batch addressed to its previous lease epoch) or "" (nothing new)."""

    node: Node
    event: str
    reregister: tuple[str, ...] = ()
    restarted: bool = False


def shard_slots(slots: int, *, shards: int, shard: int) -> list[int]:
    """The slots of a node that dispatcher shard ``shard`` of ``shards`` uses: every ``shards``-th from its
    own index, so the shards share each node's slots and never give it more batches than it has slots
    (a node with fewer slots than shards lends its slot ``shard % slots`` to several)."""
    mine = [i for i in range(slots) if i % shards == shard]
    return mine or [shard % max(1, slots)]


class FleetNodes:
    def __init__(self, *, shards: int = 1, shard: int = 0) -> None:
        self.shards, self.shard = shards, shard
        self.nodes: dict[str, Node] = {}
        self.busy: dict[str, int] = {}  # virtual fetcher -> the serial it holds
        self.last_choice: NodeChoice | None = None

    def heard(self, hb: NodeHeartbeat, now: float) -> Heard:
        node = self.nodes.get(hb.node)
        if node is not None and node.incarnation != hb.incarnation and same_process(node.incarnation, hb.incarnation):
            # The same process after a lease lapse: batches go to its new epoch from now on. Those it held
            # were expired when it was declared dead, or come back as its hand-backs: nothing to register.
            # (An older epoch's heartbeat, published again after a broker reconnect, changes nothing.)
            newer = lease_epoch(hb.incarnation) > lease_epoch(node.incarnation)
            if newer:
                node.incarnation = hb.incarnation
            out = Heard(node, "node_back" if node.dead else "node_lapsed" if newer else "")
        elif node is None or node.incarnation != hb.incarnation:
            old = node.vfids if node is not None else []
            vfids = [f"{hb.node}#{i}" for i in shard_slots(hb.slots, shards=self.shards, shard=self.shard)]
            fresh = self.nodes[hb.node] = Node(hb.node, hb.incarnation, vfids, now)
            out = Heard(fresh, "node_up", tuple(sorted(set(old) | set(vfids))), restarted=node is not None)
        else:
            out = Heard(node, "node_back" if node.dead else "")
        n = out.node
        n.last_seen, n.active, n.dead = now, hb.active, False
        part = len(n.vfids) / max(1, hb.slots)  # with dispatcher shards, this shard's part of the node
        n.p, n.q, n.successes, n.failures = (
            max(0.0, hb.rate) * part,
            int(max(0, hb.free_slots) * part),
            hb.successes,
            hb.failures,
        )
        return out

    def live(self) -> list[Node]:
        return [n for n in self.nodes.values() if not n.dead]

    def silent(self, now: float, timeout_s: float) -> list[Node]:
        """Mark dead, and return, every live node not heard for ``timeout_s`` (S1: two periods)."""
        gone = [n for n in self.nodes.values() if not n.dead and now - n.last_seen >= timeout_s]
        for n in gone:
            n.dead = True
        return gone

    def idle_fetcher(self, node: Node) -> str | None:
        return next((v for v in node.vfids if v not in self.busy), None)

    def idle_slots(self) -> int:
        return sum(len(n.vfids) for n in self.live()) - len(self.busy)

    def choose(self, *, s: int, t_of: Callable[[str], int], r_of: Callable[[str], int],
               exclude: frozenset[str] = frozenset()) -> tuple[Node, str] | None:  # fmt: skip
        """S1 rule 3: the live node (not in ``exclude``) with the largest u > t, and its idle fetcher."""
        loads = []
        for n in self.live():
            vfid = self.idle_fetcher(n)
            if vfid is None or n.name in exclude:
                continue
            drained = not any(v in self.busy for v in n.vfids)
            loads.append(NodeLoad(n.name, n.p, n.q, sum(r_of(v) for v in n.vfids), t_of(vfid), drained=drained,
                                  measured=n.successes > 0))  # fmt: skip
        choice = choose_node(loads, s=s)
        self.last_choice = choice
        if choice is None:
            return None
        node = self.nodes[choice.node]
        vfid = self.idle_fetcher(node)
        assert vfid is not None
        return node, vfid

    def pick(self, dispatcher: Dispatcher, service: str, *, s: int) -> tuple[Node, str] | None:
        """``choose`` with the dispatcher's own figures: t = what each node's idle fetcher would ask for
        (S3's n_i, at most a second's quota), r = what its fetchers were given this minute (read at one
        instant for the whole choice)."""
        given = dispatcher.grants_this_minute()
        return self.choose(s=s, t_of=lambda v: dispatcher.request_size(v, service), r_of=lambda v: given.get(v, 0))

    def heartbeats(self) -> dict[str, dict[str, float]]:
        """Each node's last S1 heartbeat figures (for the summary and the report)."""
        return {n.name: {"successes": n.successes, "failures": n.failures, "rate": n.p, "free_slots": n.q}
                for n in self.nodes.values()}  # fmt: skip
