"""bench s3's node path on real loopback sockets: the node's name server sends every name to its proxy,
and the proxy forwards a response byte for byte (pacing is the bucket's, tests/unit/test_s3_throttle_bucket.py)."""

from __future__ import annotations

import socket
import threading

import pytest
from dnslib import DNSRecord

from pipeline.harness.bench.throttle import Paths

pytestmark = [pytest.mark.integration]


def test_the_node_path_resolves_to_its_proxy_and_forwards_every_byte() -> None:
    body = bytes(range(256)) * 300
    srv = socket.socket()
    srv.bind(("127.0.10.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        conn.recv(1024)
        conn.sendall(body)
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    paths = Paths()
    try:
        path = paths.add("127.0.10.231", port=port, target="127.0.10.1", rate=2_000_000.0)
        q = DNSRecord.question("n7.bench.crawl.test")
        answer = DNSRecord.parse(q.send("127.0.0.1", path.dns.port, timeout=5))
        assert str(answer.rr[0].rdata) == "127.0.10.231"
        with socket.create_connection(("127.0.10.231", port), timeout=10) as c:
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            got = b""
            while chunk := c.recv(65536):
                got += chunk
        assert got == body
        assert path.proxy.bytes_down == len(body)
    finally:
        paths.close()
        srv.close()
