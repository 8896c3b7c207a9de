"""An asyncio loop whose clock moves only when a test says so: timers (``call_later``, ``asyncio.sleep``)
fire on it, sockets stay real. A delay is then checked as an order of events (nothing arrives until the
loop's clock has passed it), never as elapsed wall time.

    run_manual(main)               # main(loop: ManualClockLoop) -> Awaitable[None]
    await loop.idle()              # real time passes (I/O runs), the loop's clock does not
    loop.advance(0.05)             # the clock moves: timers due by then fire
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

IDLE_S = 0.2  # real time given to I/O while the clock stands still (more only makes the checks slower)


class ManualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def idle(self, seconds: float = IDLE_S) -> None:
        """Let real I/O happen for ``seconds`` of wall time (a thread sleeps; no timer of this loop)."""
        await self.run_in_executor(None, time.sleep, seconds)


def run_manual(main: Callable[[ManualClockLoop], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=ManualClockLoop) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, ManualClockLoop)
        runner.run(main(loop))  # type: ignore[arg-type]
