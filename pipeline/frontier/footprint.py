"""What a frontier holds in RAM, approximately (``crawlfleet bench scale``). Pure."""

from __future__ import annotations

from pipeline.frontier.frontier import Frontier

HOST_OVERHEAD = 400  # bytes per host: HostState + HostQueue objects, array headers, dict slot


def queue_bytes(frontier: Frontier) -> int:
    """Bytes of the queued-URL buffers (what grows with URLs; per-host overhead excluded)."""
    return sum(hs.window.nbytes() for hs in frontier.states())


def ram_bytes(frontier: Frontier) -> int:
    """Approximate bytes the frontier holds: URL buffers plus a fixed cost per host."""
    return queue_bytes(frontier) + HOST_OVERHEAD * len(frontier)
