"""Run a private unbound instance from ``docker/unbound.conf`` (tests, benchmarks, dev stacks).

The fleet's shared instance is started by ``scripts/svc-unbound.sh``; this module renders the same
template with other ports and paths, so a test can put unbound in front of its own test bed on a
free port: ``start_unbound(upstream_port, port)``. The process stays in the foreground (``-d``)
and is stopped with :func:`stop_unbound`.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "docker" / "unbound.conf"


class UnboundError(RuntimeError):
    pass


def unbound_binary() -> str | None:
    """Path of the unbound executable, or None when it is not installed."""
    return shutil.which("unbound") or next(
        (p for p in ("/usr/sbin/unbound", "/usr/local/sbin/unbound") if Path(p).exists()), None
    )


def render_config(
    *,
    port: int,
    upstream_port: int,
    workdir: str | Path,
    min_ttl_s: int = 300,
    max_ttl_s: int = 86400,
    template: str | None = None,
) -> str:
    """The template with the "(set at start)" lines filled in."""
    text = TEMPLATE.read_text() if template is None else template
    workdir = Path(workdir)
    subs = (
        (r"^( *port:) *\d+.*$", rf"\g<1> {port}"),
        (r"^( *forward-addr:) *127\.0\.0\.1@\d+.*$", rf"\g<1> 127.0.0.1@{upstream_port}"),
        (r"^( *directory:) .*$", rf'\g<1> "{workdir}"'),
        (r"^( *pidfile:) .*$", rf'\g<1> "{workdir / "unbound.pid"}"'),
        (r"^( *cache-min-ttl:) .*$", rf"\g<1> {min_ttl_s}"),
        (r"^( *cache-max-ttl:) .*$", rf"\g<1> {max_ttl_s}"),
    )
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text, flags=re.MULTILINE)
        if n != 1:
            raise UnboundError(f"template line for {pattern!r} found {n} times")
    return text


def free_port() -> int:
    """A port free on 127.0.0.1 for both UDP and TCP at the time of asking (unbound binds both)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port


def _answers(port: int) -> bool:
    """True once something answers a DNS query for ``.`` on 127.0.0.1:port (refused counts)."""
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.2)
        try:
            s.sendto(query, ("127.0.0.1", port))
            return s.recv(512)[:2] == b"\x12\x34"
        except OSError:
            return False


def start_unbound(
    upstream_port: int,
    port: int = 0,
    *,
    workdir: str | Path | None = None,
    min_ttl_s: int = 300,
    max_ttl_s: int = 86400,
    timeout_s: float = 30.0,  # unbound answers in a second on a quiet box; a loaded 2-core one needs more
    log_queries: bool = False,
) -> subprocess.Popen[bytes]:
    """Start unbound on 127.0.0.1:``port`` (0 = a free one) forwarding crawl.test to ``upstream_port``.

    Returns the process once it answers; ``proc.args`` ends with the config path and the chosen
    port is in ``proc.unbound_port`` (an attribute set here). ``log_queries`` makes unbound log every
    query it receives to ``WORKDIR/unbound.log`` (``info: 127.0.0.1 NAME. A IN``): unbound's own count
    of what reached it (see :func:`logged_queries`).
    """
    binary = unbound_binary()
    if binary is None:
        raise UnboundError("unbound is not installed (scripts/svc-unbound.sh install)")
    workdir = Path(workdir or tempfile.mkdtemp(prefix="unbound-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # A port found free can be taken before unbound binds it (other tests run on this machine):
    # with port 0, try a few fresh ones.
    attempts = 5 if port == 0 else 1
    for attempt in range(attempts):
        chosen = port or free_port()
        try:
            return _launch(
                binary, workdir, chosen, upstream_port, min_ttl_s, max_ttl_s, timeout_s, log_queries
            )
        except UnboundError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _launch(
    binary: str,
    workdir: Path,
    port: int,
    upstream_port: int,
    min_ttl_s: int,
    max_ttl_s: int,
    timeout_s: float,
    log_queries: bool,
) -> subprocess.Popen[bytes]:
    conf = workdir / "unbound.conf"
    template = TEMPLATE.read_text()
    if log_queries:
        template = re.sub(
            r"^( *)verbosity:.*$", r"\g<0>\n\g<1>log-queries: yes", template, count=1, flags=re.MULTILINE
        )
    conf.write_text(
        render_config(
            port=port,
            upstream_port=upstream_port,
            workdir=workdir,
            min_ttl_s=min_ttl_s,
            max_ttl_s=max_ttl_s,
            template=template,
        )
    )
    log = open(workdir / "unbound.log", "wb")  # noqa: SIM115 - owned by the child for its lifetime
    proc = subprocess.Popen([binary, "-d", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    proc.unbound_port = port  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout_s
    while not _answers(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_unbound(proc)
            raise UnboundError(f"unbound did not start: {(workdir / 'unbound.log').read_text()[-2000:]}")
        time.sleep(0.05)
    return proc


def logged_queries(proc: subprocess.Popen[bytes], name: str, qtype: str = "A") -> int:
    """How many ``qtype`` queries for ``name`` an unbound started with ``log_queries`` has logged."""
    log = Path(str(proc.args[-1])).parent / "unbound.log"  # type: ignore[index]
    needle = f" {name.rstrip('.')}. {qtype} IN"
    return sum(1 for line in log.read_text(errors="replace").splitlines() if line.endswith(needle))


def stop_unbound(proc: subprocess.Popen[bytes], *, timeout_s: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
