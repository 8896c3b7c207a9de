"""One parse process of ``pipeline.embedded.parseproc.ParsePool``: the process, its pipe, and its main loop.

The child (``python -m pipeline.embedded.parsechild FD``) reads bundles of ``FetchResult`` from its end of a
socket pair and answers each bundle with ``pipeline.links.prepare.prepare_found`` of every result in it, or
None for one it could not prepare (the crawl's process then prepares it itself). It holds no crawl
state: killing it at any moment costs the crawl nothing but the work it had in hand. Each page is
parsed under a ``pipeline.links.guard.ParseGuard`` (its marker file names the page in hand; a page past
``fetch.parse_cpu_limit_s`` of CPU ends the process), so the parent learns which page killed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, cast

from fetchers.records import FetchResult, Prepared
from pipeline.embedded.childproc import RestartBudget, spawn_module

log = logging.getLogger(__name__)

_FRAME = struct.Struct("!i")  # multiprocessing.Connection's frame header
_SOCKET_BUFFER = 4 << 20  # capped by net.core.wmem_max / rmem_max


class Pipe(asyncio.Protocol):
    """Length-prefixed pickles over the socket pair, framed as ``multiprocessing.Connection`` frames them
    (the child reads with one). Writes never block the loop: the transport buffers them."""

    def __init__(self, on_message: Callable[[Any], None], on_lost: Callable[[], None]) -> None:
        self.on_message, self.on_lost = on_message, on_lost
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, but not necessarily an ``asyncio.Transport`` subclass: uvloop's is its own.
        self.transport = cast(asyncio.Transport, transport)

    def send(self, msg: Any) -> None:
        if self.transport is None or self.transport.is_closing():
            return  # connection_lost delivers what the child held
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        # Two writes, not header + data: a bundle runs to megabytes, and joining them would copy it.
        self.transport.write(_FRAME.pack(len(data)))
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        at = 0
        while len(buf) - at >= 4:
            (size,) = _FRAME.unpack_from(buf, at)
            if len(buf) - at - 4 < size:
                break
            msg = pickle.loads(memoryview(buf)[at + 4 : at + 4 + size])
            at += 4 + size
            self.on_message(msg)
        del buf[:at]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.on_lost()


class ChildProcess:
    """One parse process and its pipe."""

    def __init__(
        self, index: int, marker: str, *, clock: Callable[[], float] = time.monotonic, import_path: bool = False
    ) -> None:
        self.index = index
        self.import_path = import_path  # the child imports from the parent's sys.path (plugins)
        self.marker = marker  # the child's ParseGuard file: which page it had in hand when it died
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.pipe: Pipe | None = None
        self.ready = False  # imports done: it answers at once from now on
        self.outbox: list[tuple[int, FetchResult]] = []
        self.known: list[int] = []  # fingerprints for the child's known links, sent with the next results
        self.budget = RestartBudget(clock=clock)  # spent: its share goes to the other children, until it has room

    def died(self, *, blamed: bool) -> None:
        self.budget.died(blamed=blamed)

    def may_restart(self) -> bool:
        return self.budget.may_restart()

    def launch(self) -> None:
        # Buffers of a few MB: the parent's loop writes once per turn, and a ~200 KB default buffer
        # would hold only ~10 pages a turn, so bodies would queue in the parent (measured: ~0.4 s).
        self.proc, self.sock = spawn_module("pipeline.embedded.parsechild", buffer_bytes=_SOCKET_BUFFER,
                                            import_path=self.import_path)

    def close(self) -> int | None:
        """Drop the pipe and reap the process (killed if still running); its exit code."""
        pipe, self.pipe, self.sock, self.outbox, self.ready = self.pipe, None, None, [], False
        self.known = []
        if pipe is not None and pipe.transport is not None:
            pipe.transport.abort()
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        return proc.wait(5)

    def stop(self) -> None:
        """Ask the child to exit, give it a moment, then close."""
        if self.pipe is not None:
            self.pipe.send(("stop", None))
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2)
        self.close()


# --- the child ----------------------------------------------------------------------------------------
class KnownLinks:
    """The links a parse process leaves out of what it hands back: fingerprints the parent's seen-set holds
    for good (``ParsePool.note_known``), whose links the parent would drop after a look-up. Two generations
    of up to ``half`` each bound the memory (a forgotten one only costs the parent that look-up again)."""

    def __init__(self, half: int = 250_000) -> None:
        self.half = half
        self.young: set[int] = set()
        self.old: set[int] = set()

    def add(self, url_ids: list[int]) -> None:
        if len(self.young) + len(url_ids) > self.half:
            self.old, self.young = self.young, set()
        self.young.update(url_ids)

    def drop_from(self, prepared: Prepared) -> Prepared:
        found, young, old = prepared.found, self.young, self.old
        if found and (young or old):
            prepared.found = [link for link in found if link[1] not in young and link[1] not in old]
        return prepared


def _child_main(fd: int) -> None:
    """Entry point of a parse process: ``python -m pipeline.embedded.parsechild FD``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides how the crawl stops
    conn = Connection(fd)
    from pipeline.crawl import gcpolicy
    from pipeline.links.guard import ParseGuard
    from pipeline.links.prepare import prepare_found

    try:
        settings, marker, plugins = conn.recv()
        prep: Callable[..., Prepared] = prepare_found
        if plugins is not None:  # the crawl's plugins run here with the links (pipeline/plugins/prepare.py)
            from pipeline.plugins import prepare as plugged

            prep = functools.partial(plugged.prepare_found, plugins=plugins)

        guard = ParseGuard(marker, cpu_limit_s=settings.fetch.parse_cpu_limit_s)
        known = KnownLinks()
        gcpolicy.tune_for_crawl()
        conn.send(("ready", []))
        while True:
            kind, items, *more = conn.recv()
            if kind != "prep":
                break
            known.add(more[0])
            out: list[tuple[int, Prepared | None]] = []
            append, enter, leave = out.append, guard.enter, guard.leave
            for seq, result in items:
                enter(seq, result.url)
                try:
                    append((seq, known.drop_from(prep(result, settings))))
                except Exception:  # the crawl's process prepares it then
                    log.exception("preparing %s failed", result.url)
                    append((seq, None))
                finally:
                    leave()
            conn.send(("done", out))
    except (EOFError, OSError):
        pass
    finally:
        os._exit(0)


if __name__ == "__main__":
    _child_main(int(sys.argv[1]))
