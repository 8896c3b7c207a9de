"""Private instances of the shared services, which a fault trial may kill without hurting anyone else.

- ``PrivateUnbound``: unbound from docker/unbound.conf on a free port, in front of a testbed's zone.
- ``PrivateRabbit``: a RabbitMQ node of its own (name, ports, data dir), to kill or stop.
- ``PrivateThrift``: a second HBase Thrift1 server on a free port over the shared HBase master
  (``scripts/svc-hbase.sh thrift-run PORT``).
- ``broker_vhost``: a private vhost on the shared broker (heartbeats are a fanout: a dispatcher on a
  shared vhost would adopt other tests' workers).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from pipeline.harness.faults.procs import ROOT, HarnessError, Managed, wait_until


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free on every address now, for a server started *later* (the port is released in between).

    Chosen below the kernel's ephemeral range, which ``bind(0)`` and outgoing connections draw from, so no
    other process's ephemeral bind can take it meanwhile. (Seen in make test: a Thrift server told to bind
    a bridge address shared its ephemeral port with another test's 127.0.0.1 listener, which is legal for
    two different addresses.) Only another ``free_port`` caller can collide, at random over ~12,000 ports.
    """
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 12_000), low)
        if port in _RESERVED:
            continue
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("", port))  # the wildcard: fails if any address holds the port
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, kind) as s:  # a box with that range full: the old way
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_RESERVED = frozenset({25672})  # the shared RabbitMQ's Erlang distribution port (AMQP + 20000)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# --- unbound -------------------------------------------------------------------------------------------
class PrivateUnbound:
    """unbound on a port free for UDP and TCP; a restart reuses the port (the crawler knows only it)."""

    def __init__(self, upstream_port: int, workdir: Path) -> None:
        from pipeline.dns.unbound import unbound_binary

        binary = unbound_binary()
        if binary is None:
            raise HarnessError("unbound is not installed (scripts/svc-unbound.sh install)")
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir, self.upstream_port = workdir, upstream_port
        self.conf = workdir / "unbound.conf"
        self.port = 0
        self.proc = Managed("unbound", [binary, "-d", "-c", str(self.conf)], dict(os.environ), workdir / "unbound.log")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _configure(self, port: int) -> None:
        from pipeline.dns.unbound import render_config

        self.port = port
        self.conf.write_text(render_config(port=port, upstream_port=self.upstream_port, workdir=self.workdir))

    def _start_once(self, *, timeout_s: float = 30.0) -> bool:
        from pipeline.dns.unbound import _answers

        self.proc.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _answers(self.port):
                return True
            if not self.proc.running:  # e.g. "can't bind socket": the port was taken meanwhile
                return False
            time.sleep(0.05)
        self.proc.terminate(timeout_s=5)
        return False

    def start(self) -> PrivateUnbound:
        """First start: a fresh free port per attempt (another test may take one between probe and bind)."""
        from pipeline.dns.unbound import free_port as free_udp_tcp_port

        for _ in range(5):
            self._configure(free_udp_tcp_port())
            if self._start_once():
                return self
        raise HarnessError(f"unbound did not start:\n{self.proc.log_tail()}")

    def restart(self) -> None:
        """Kill (if running) and start again on the same port."""
        if self.proc.running:
            self.proc.kill()
        for _ in range(10):
            if self._start_once():
                return
            time.sleep(0.5)
        raise HarnessError(f"unbound did not come back on port {self.port}:\n{self.proc.log_tail()}")

    def stop(self) -> None:
        self.proc.terminate(timeout_s=5)


# --- RabbitMQ ------------------------------------------------------------------------------------------
def _rabbitmqctl(node: str | None, *args: str, timeout_s: float = 60) -> str:
    env = dict(os.environ)
    if node:
        env["RABBITMQ_NODENAME"] = node
    else:
        env.setdefault("RABBITMQ_NODENAME", "rabbit@localhost")
    proc = subprocess.run(["rabbitmqctl", "-q", *args], env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise HarnessError(f"rabbitmqctl {' '.join(args)}: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def wait_amqp(url: str, *, timeout_s: float = 90.0) -> None:
    from kombu import Connection

    def up() -> bool:
        try:
            with Connection(url, connect_timeout=2) as conn:
                conn.connect()
            return True
        except Exception:
            return False

    wait_until(up, timeout_s=timeout_s, every_s=0.3, what=f"AMQP at {url.rsplit('@', 1)[-1]}")


@contextmanager
def broker_vhost(*, port: int = 5672) -> Iterator[str]:
    """A fresh vhost on the shared broker (started by scripts/svc-rabbitmq.sh if down); yields its URL."""
    if not port_open(port):
        subprocess.run([str(ROOT / "scripts" / "svc-rabbitmq.sh"), "start"], check=True, timeout=300)
    vhost = f"cf-faults-{uuid.uuid4().hex[:10]}"
    _rabbitmqctl(None, "add_vhost", vhost)
    _rabbitmqctl(None, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    url = f"amqp://guest:guest@127.0.0.1:{port}/{vhost}"
    try:
        wait_amqp(url)
        yield url
    finally:
        with suppress(HarnessError, subprocess.SubprocessError):
            _rabbitmqctl(None, "delete_vhost", vhost)


class PrivateRabbit:
    """A RabbitMQ node on free ports with its own data dir; durable state survives a restart."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.dist_port = free_port()
        self.name = f"cff{uuid.uuid4().hex[:8]}@localhost"
        for sub in ("mnesia", "log"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        (workdir / "enabled_plugins").write_text("[].\n")
        server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
        if not Path(server).exists():
            server = shutil.which("rabbitmq-server") or server
        w = workdir
        env = dict(
            os.environ, RABBITMQ_NODENAME=self.name, RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port), RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_MNESIA_BASE=str(w / "mnesia"), RABBITMQ_LOG_BASE=str(w / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(w / "enabled_plugins"), RABBITMQ_PID_FILE=str(w / "pid"),
            RABBITMQ_FEATURE_FLAGS_FILE=str(w / "feature_flags"), RABBITMQ_CONFIG_FILE=str(w / "none"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(w / "none-advanced.config"), ERL_EPMD_ADDRESS="127.0.0.1",
        )  # fmt: skip
        # cwd: beam writes crash dumps (MnesiaCore.*) into its working directory, never the checkout
        self.proc = Managed("rabbitmq", [server], env, workdir / "server.out", cwd=workdir)

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def start(self) -> PrivateRabbit:
        if shutil.which("rabbitmq-server") is None:
            subprocess.run([str(ROOT / "scripts" / "svc-rabbitmq.sh"), "install"], check=True, timeout=600)
        self.proc.start()
        wait_amqp(self.url)
        return self

    def restart(self) -> float:
        if self.proc.running:
            self.proc.kill()
        wait_until(lambda: not port_open(self.port), timeout_s=30, what="the broker port to close")
        self.start()
        return time.time()

    def stop(self) -> None:
        self.proc.terminate(timeout_s=30)


# --- HBase Thrift --------------------------------------------------------------------------------------
def thrift_answers(port: int) -> bool:
    import happybase

    try:
        conn = happybase.Connection("127.0.0.1", port, timeout=15000)
        try:
            conn.tables()
        finally:
            conn.close()
        return True
    except Exception:
        return False


class PrivateThrift:
    """A Thrift1 server of our own over the shared HBase (which must be up: scripts/svc-hbase.sh start)."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        script = str(ROOT / "scripts" / "svc-hbase.sh")
        self.proc = Managed("thrift", [script, "thrift-run", str(self.port)], dict(os.environ), workdir / "thrift.log")

    def start(self, *, timeout_s: float = 180) -> PrivateThrift:
        self.proc.start()
        wait_until(lambda: thrift_answers(self.port), timeout_s=timeout_s, every_s=1.0, what="the Thrift server")
        return self

    def restart(self) -> float:
        if self.proc.running:
            self.proc.kill()
        self.start()
        return time.time()

    def stop(self) -> None:
        self.proc.terminate(timeout_s=10)
