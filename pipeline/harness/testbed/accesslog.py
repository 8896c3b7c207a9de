"""Buffered JSON-lines access log: one line per request, written when the request is complete.

Each line: {"t": when the server had the request's head (epoch float), "end": when it handed the
whole reply to the socket (or found the client gone), "host": host header lower-cased without port,
"path": path+query, "client": peer ip, "ua": the User-Agent header, "status": int}, plus "scheme":
"https" for a request that came over TLS (a line without it came over plain HTTP) and "bytes": the
answer's size on the wire, head and body, where the server gives it (the living web's pages). A
request is in flight at time T for the server when ``t <= T < end``; on loopback most replies take
microseconds, so ``t`` and ``end`` are often equal.

Lines are collected in memory and written in one ``os.write`` every ``interval_s``, on ``flush`` and on
close. ``flush`` is also what a flush request does (``FLUSH_HOST``, answered by the server after its
buffer is written), so a reader can have every completed request on disk without waiting for a timer.
The file is opened with O_APPEND so several worker processes can share it (each flush is one write()).
"""

from __future__ import annotations

import asyncio
import json
import os
import time

FLUSH_HOST = "flush.invalid"  # a request with this Host flushes the serving process's log; never logged


class AccessLog:
    """Collects lines in memory; ``flush`` writes them in one ``os.write``. Path None = disabled."""

    __slots__ = ("_fd", "_buf", "_task", "interval_s")

    def __init__(self, path: str | None, *, interval_s: float = 0.5) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else -1
        self._buf: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self.interval_s = interval_s

    @property
    def enabled(self) -> bool:
        return self._fd >= 0

    def record(self, host: str, path: str, client: str, status: int, *, start: float, ua: str = "",
               scheme: str = "http", nbytes: int = -1) -> None:  # fmt: skip
        """One completed request: its head arrived at ``start``; it ends now."""
        if self._fd < 0:
            return
        # json.dumps only for the fields a client controls; the rest cannot need escaping.
        tail = "}\n" if scheme == "http" else f', "scheme": "{scheme}"}}\n'
        if nbytes >= 0:
            tail = f', "bytes": {nbytes}{tail}'
        self._buf.append(
            f'{{"t": {start:.6f}, "end": {time.time():.6f}, "host": {json.dumps(host)}, '
            f'"path": {json.dumps(path)}, "client": "{client}", "ua": {json.dumps(ua)}, "status": {status}{tail}'
        )

    def flush(self) -> None:
        if self._fd < 0 or not self._buf:
            return
        data = "".join(self._buf).encode()
        self._buf.clear()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def start(self) -> None:
        """Start the periodic flusher on the running loop."""
        if self._fd >= 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.flush()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.flush()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
