"""A private standalone HBase for fault trials: the JVM that holds the data, and a Thrift server over it.

``scripts/hbase-private.sh`` runs each JVM in the foreground with its own data directory and free
ports (ZooKeeper, master RPC, region server RPC, Thrift), so a trial may SIGKILL the master JVM
(master + region server + ZooKeeper in one process in standalone mode) while the shared HBase on
9090 serves everyone else. The Thrift server stays up across that kill, as it would in a cluster
where the gateway and the data nodes are different machines.

``ready`` is judged by a real round trip through Thrift to a region (a ``scan`` of a table of ours),
not by a port: the Thrift port answers ``tables()`` from the master before regions are online.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from pipeline.harness.faults.procs import ROOT, HarnessError, Managed, wait_until
from pipeline.harness.faults.services import free_port

SCRIPT = ROOT / "scripts" / "hbase-private.sh"
PROBE_TABLE = b"probe_ready"


class PrivateHBase:
    """Master JVM and Thrift JVM of a private standalone HBase under ``workdir``."""

    def __init__(self, workdir: Path, *, heap: str = "1g") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.zk_port, self.master_port, self.rs_port, self.thrift_port = (free_port() for _ in range(4))
        env = dict(
            os.environ, HBASE_PRIVATE_DATA=str(workdir), HBASE_PRIVATE_ZK_PORT=str(self.zk_port),
            HBASE_PRIVATE_MASTER_PORT=str(self.master_port), HBASE_PRIVATE_RS_PORT=str(self.rs_port),
            HBASE_PRIVATE_THRIFT_PORT=str(self.thrift_port), HBASE_PRIVATE_HEAP=heap,
        )  # fmt: skip
        self.master = Managed("hbase-master", [str(SCRIPT), "master-run"], env, workdir / "master.log")
        self.thrift = Managed("hbase-thrift", [str(SCRIPT), "thrift-run"], env, workdir / "thrift.log")
        self.prefix = f"hp{uuid.uuid4().hex[:6]}"

    def start(self, *, timeout_s: float = 300.0) -> PrivateHBase:
        self.master.start()
        self.thrift.start()
        self.wait_ready(timeout_s=timeout_s)
        return self

    def answers(self) -> bool:
        """A Thrift round trip that reaches a region server (creates the probe table once)."""
        import happybase

        try:
            conn = happybase.Connection("127.0.0.1", self.thrift_port, timeout=10000)
            try:
                if PROBE_TABLE not in conn.tables():
                    conn.create_table(PROBE_TABLE, {"f": {}})
                table = conn.table(PROBE_TABLE)
                table.put(b"r", {b"f:x": str(time.time()).encode()})
                return table.row(b"r") != {}
            finally:
                conn.close()
        except Exception:
            return False

    def wait_ready(self, *, timeout_s: float = 300.0) -> float:
        def ready() -> bool:
            for p in (self.master, self.thrift):
                if not p.running:
                    raise HarnessError(f"{p.name} exited:\n{p.log_tail()}")
            return self.answers()

        wait_until(ready, timeout_s=timeout_s, every_s=1.0, what="the private HBase")
        return time.time()

    def kill_master(self) -> float:
        """SIGKILL the JVM that holds the data (its process group: the launcher exec'd into it)."""
        return self.master.kill()

    def start_master(self) -> float:
        """Start the master JVM again on the same data directory and ports; returns the time it started."""
        self.master.start()
        return time.time()

    def stop(self) -> None:
        self.thrift.terminate(timeout_s=15)
        self.master.terminate(timeout_s=60)
