"""One host's state in the frontier: its RAM window, politeness clock, lease and activity flags.

Its own module so that the frontier and the active-host set (which both hold HostStates) share the
type without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.frontier.hostqueue import HostQueue


@dataclass(slots=True)
class HostState:
    host: str
    pending: int = 0  # PENDING URLs of this host, in RAM or in the store, not leased
    window: HostQueue = field(init=False)
    complete: bool = True  # the window holds every pending URL of the host
    next_allowed: float = 0.0
    leased_to: str = ""
    leased_count: int = 0  # URLs handed out under the current lease
    ip: str = ""
    in_heap: bool = False
    issued: int = 0  # distinct URLs leased from this host, re-fetches not counted (max-pages-per-host)
    active: bool = False  # holds a window and may be leased (pipeline.frontier.activehosts)
    session: int = 0  # URLs leased since the host was last activated
    waiting: bool = False  # queued for activation
    # Bumped whenever URLs join the host's pending set (add, add_pending, requeue, restore): a refill
    # read before a bump may miss them, so it must not mark the window complete (Frontier.refill).
    epoch: int = 0

    def __post_init__(self) -> None:
        self.window = HostQueue(self.host)
