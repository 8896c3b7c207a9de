"""Start a crawl helper process (fetch or parse) as ``python -m MODULE FD`` over a socket pair.

Not multiprocessing's spawn: spawn re-imports the parent's ``__main__``, which re-runs any script that
embeds a crawl without a ``__main__`` guard; and never fork a process that has an event loop and
threads running. The child gets its end of the pair as file descriptor ``FD`` (its only argument).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys


def spawn_module(module: str, *, buffer_bytes: int = 0) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Run ``python -m module FD``; returns the process and the parent's end of the socket pair.
    ``buffer_bytes`` > 0 widens both ends' socket buffers (capped by net.core.wmem_max / rmem_max)."""
    ours, theirs = socket.socketpair()
    if buffer_bytes > 0:
        for sock in (ours, theirs):
            for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, opt, buffer_bytes)
    try:
        proc = subprocess.Popen([sys.executable, "-m", module, str(theirs.fileno())], pass_fds=[theirs.fileno()])
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, ours
