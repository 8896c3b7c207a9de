"""The event loop a crawl runs on: asyncio's own, or uvloop (libuv), chosen by ``fetch.event_loop``.

``asyncio`` (the default) is the standard library's loop; ``uvloop`` requires the uvloop package (a
dependency, so it is there unless a platform lacks it); ``auto`` takes uvloop when it imports and asyncio
otherwise. The embedded crawl, its fetch processes and a fleet node's fetch loop all make their loop here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
CHOICES = ("asyncio", "uvloop", "auto")


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A function making a new loop of the kind ``choice`` names; ImportError when ``uvloop`` is asked for
    and cannot be imported, ValueError for a name not in ``CHOICES``."""
    if choice not in CHOICES:
        raise ValueError(f"fetch.event_loop: expected one of {', '.join(CHOICES)}, got {choice!r}")
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T], choice: str) -> T:
    """``asyncio.run(coro)`` on a loop of the kind ``choice`` names."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(coro)


def running_kind() -> str:
    """``uvloop`` or ``asyncio``: the kind of the loop running now (for summaries and logs)."""
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
