"""A lean authoritative DNS server for ``crawl.test`` on UDP and TCP (asyncio + dnslib packing).

Answers are computed once per (question bytes, RD flag) with dnslib and then replayed from a
bounded dict with only the 2-byte query id patched, so the hot path is a slice and a sendto.

Names: ``site{i}.crawl.test`` (A, TTL from ``Web.ttl``), ``hostile.crawl.test``,
``n{k}.bench.crawl.test`` (wildcard -> 127.0.10.1), and the specials below. Unknown names get
NXDOMAIN with the SOA in the authority section.

====================== ==================================================================
name                   behaviour
====================== ==================================================================
v6.crawl.test          AAAA ::1 and A 127.0.10.1
shortttl.crawl.test    A 127.0.10.1, TTL 1
longttl.crawl.test     A 127.0.10.1, TTL 7 days
private.crawl.test     A 127.0.0.53 (loopback, outside 127.0.10.0/24: SSRF tests)
truncated.crawl.test   UDP: TC bit, no answers; TCP: the A record
garbage.crawl.test     malformed bytes after the query id
silent.crawl.test      never answers
servfail.crawl.test    SERVFAIL
slow.crawl.test        A 127.0.10.1 after ``slow_ms``
expired.crawl.test     A 127.0.10.1 (its TLS certificate has expired: tlscerts.py)
wrongname.crawl.test   A 127.0.10.1 (its TLS certificate names another host)
====================== ==================================================================
``latency_ms`` delays every answer (DNS benchmarks); ``jitter`` multiplies that delay by a log-normal
factor (sigma ``jitter``, median 1) so most answers take about the latency and a few much longer, as
S4 observed (10-100 ms, some seconds); ``loss`` drops that fraction of queries (seeded, repeatable).
``python -m pipeline.harness.testbed.dns_server HOST PORT LATENCY_MS JITTER LOSS`` serves the zone
alone (the DNS benchmark runs it in a process of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import sys
from dataclasses import dataclass, field
from typing import cast

from dnslib import AAAA, NS, QTYPE, RCODE, RR, SOA, A, DNSError, DNSRecord

from pipeline.harness.testbed.model import DOMAIN, EXPIRED_HOST, WRONGNAME_HOST, Web, host_index, ip_for_host

LONG_TTL = 7 * 24 * 3600
_FIXED_A = {
    "v6.crawl.test": ("127.0.10.1", 300),
    "shortttl.crawl.test": ("127.0.10.1", 1),
    "longttl.crawl.test": ("127.0.10.1", LONG_TTL),
    "private.crawl.test": ("127.0.0.53", 300),
    "slow.crawl.test": ("127.0.10.1", 300),
    "hostile.crawl.test": ("127.0.10.1", 300),
    "ns.crawl.test": ("127.0.0.1", 3600),
    EXPIRED_HOST: ("127.0.10.1", 300),
    WRONGNAME_HOST: ("127.0.10.1", 300),
}
_SPECIAL = frozenset(
    {
        "silent.crawl.test",
        "garbage.crawl.test",
        "servfail.crawl.test",
        "truncated.crawl.test",
        "slow.crawl.test",
    }
)
DROP, SEND = 0, 1
_CACHE_MAX = 200_000


@dataclass(slots=True)
class Zone:
    """Pure answer logic: raw query bytes -> (action, response bytes, delay seconds)."""

    web: Web
    hostile: bool = False
    latency_ms: float = 0.0
    slow_ms: float = 2000.0
    loss: float = 0.0
    jitter: float = 0.0
    _cache: dict[bytes, tuple[int, bytes, float]] = field(default_factory=dict)
    _rng: random.Random = field(default_factory=lambda: random.Random(20))

    def answer(self, data: bytes, *, tcp: bool = False) -> tuple[int, bytes, float]:
        """What to do with one query. Never raises; junk queries are dropped."""
        end = _question_end(data)
        if end < 0:
            return DROP, b"", 0.0
        key = bytes((data[2] & 0x01, tcp)) + data[12:end]
        hit = self._cache.get(key)
        if hit is None:
            hit = self._fast(data, end) or self._compute(data, tcp=tcp)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key] = hit
        action, body, delay = hit
        if self.loss > 0 and self._rng.random() < self.loss:
            return DROP, b"", 0.0
        if self.jitter > 0 and delay > 0:
            delay = min(delay * self._rng.lognormvariate(0.0, self.jitter), 10.0)
        return action, data[:2] + body, delay

    def _fast(self, data: bytes, end: int) -> tuple[int, bytes, float] | None:
        """Hand-packed answer for the common case (an A query for a name with one A record);
        None sends the query down the general dnslib path."""
        if data[end - 4 : end] != b"\x00\x01\x00\x01":  # qtype A, class IN
            return None
        labels, pos = [], 12
        while data[pos]:
            labels.append(data[pos + 1 : pos + 1 + data[pos]])
            pos += 1 + data[pos]
        try:
            name = b".".join(labels).decode("ascii").lower()
        except UnicodeDecodeError:
            return None
        if name in _SPECIAL:
            return None
        records = self._records(name)
        if records is None or len(records) != 1 or records[0][0] != QTYPE.A:
            return None
        _, rdata, ttl = records[0]
        flags = bytes((0x84 | (data[2] & 0x01), 0x00))  # QR, AA, RD copied; RA 0; NOERROR
        answer = b"\xc0\x0c\x00\x01\x00\x01" + struct.pack("!IH", ttl, 4) + socket.inet_aton(str(rdata))
        body = flags + b"\x00\x01\x00\x01\x00\x00\x00\x00" + data[12:end] + answer
        return SEND, body, self.latency_ms / 1000.0

    def _compute(self, data: bytes, *, tcp: bool) -> tuple[int, bytes, float]:
        try:
            req = DNSRecord.parse(data)
        except (DNSError, ValueError, IndexError, struct.error):
            return DROP, b"", 0.0
        delay = self.latency_ms / 1000.0
        reply = req.reply()
        reply.header.aa = 1
        reply.header.ra = 0
        qname = str(req.q.qname).rstrip(".").lower()
        qtype = req.q.qtype
        if qname == "silent.crawl.test":
            return DROP, b"", 0.0
        if qname == "garbage.crawl.test":
            return SEND, b"\x81\x80\x00\x01\x00\x05\x00\x00\x00\x00\x07garb\xff\xc0\xff\x00", delay
        if qname == "servfail.crawl.test":
            reply.header.rcode = RCODE.SERVFAIL
            return SEND, reply.pack()[2:], delay
        if qname == "truncated.crawl.test" and not tcp:
            reply.header.tc = 1
            return SEND, reply.pack()[2:], delay
        if qname == "slow.crawl.test":
            delay += self.slow_ms / 1000.0
        records = self._records(qname)
        if records is None:
            reply.header.rcode = RCODE.NXDOMAIN
            reply.add_auth(self._soa())
        else:
            for rtype, rdata, ttl in records:
                if qtype in (rtype, QTYPE.ANY):
                    reply.add_answer(RR(req.q.qname, rtype, rdata=rdata, ttl=ttl))
            if not reply.rr:
                reply.add_auth(self._soa())  # NODATA
        return SEND, reply.pack()[2:], delay

    def _records(self, qname: str) -> list[tuple[int, object, int]] | None:
        """(type, rdata, ttl) of every record at ``qname``, or None for NXDOMAIN."""
        if qname == DOMAIN:
            return [(QTYPE.SOA, self._soa().rdata, 3600), (QTYPE.NS, NS(f"ns.{DOMAIN}."), 3600)]
        i = host_index(qname, self.web.hosts)
        if i >= 0:
            return [(QTYPE.A, A(ip_for_host(i, self.web.hosts)), self.web.ttl(i))]
        if qname == "hostile.crawl.test" and not self.hostile:
            return None
        if qname in _FIXED_A:
            ip, ttl = _FIXED_A[qname]
            out: list[tuple[int, object, int]] = [(QTYPE.A, A(ip), ttl)]
            if qname == "v6.crawl.test":
                out.append((QTYPE.AAAA, AAAA("::1"), ttl))
            return out
        if qname == "truncated.crawl.test":
            return [(QTYPE.A, A("127.0.10.1"), 300)]
        if qname.endswith(".bench.crawl.test"):
            label = qname[: -len(".bench.crawl.test")]
            if label[:1] == "n" and label[1:].isdigit():
                return [(QTYPE.A, A("127.0.10.1"), 300)]
        return None

    def _soa(self) -> RR:
        soa = SOA(f"ns.{DOMAIN}.", f"hostmaster.{DOMAIN}.", (1, 3600, 600, 86400, 60))
        return RR(f"{DOMAIN}.", QTYPE.SOA, rdata=soa, ttl=60)


def _question_end(data: bytes) -> int:
    """Offset just past the first question (name + type + class), or -1 when malformed."""
    n = len(data)
    if n < 17 or data[2] & 0x80 or data[4:6] != b"\x00\x01":
        return -1
    pos = 12
    while pos < n:
        length = data[pos]
        if length == 0:
            end = pos + 5
            return end if end <= n else -1
        if length & 0xC0:
            return -1
        pos += 1 + length
    return -1


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, zone: Zone) -> None:
        self.zone = zone
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        action, out, delay = self.zone.answer(data)
        if action == DROP or self.transport is None:
            return
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._send, out, addr)
        else:
            self.transport.sendto(out, addr)

    def _send(self, out: bytes, addr: tuple[str, int]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(out, addr)


async def _tcp_client(zone: Zone, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readexactly(2)
            data = await reader.readexactly(struct.unpack("!H", head)[0])
            action, out, delay = zone.answer(data, tcp=True)
            if action == DROP:
                continue
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(struct.pack("!H", len(out)) + out)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def start_dns(zone: Zone, host: str, port: int, *, attempts: int = 50) -> tuple[int, list[object]]:
    """Serve ``zone`` on UDP and TCP ``host:port`` (0 = a free port common to both).

    Returns (port, [udp transport, tcp server]); close both to stop.
    """
    loop = asyncio.get_running_loop()
    last: OSError | None = None
    for _ in range(attempts):
        transport, _proto = await loop.create_datagram_endpoint(lambda: _UDP(zone), local_addr=(host, port))
        chosen = transport.get_extra_info("sockname")[1]
        with contextlib.suppress(OSError):  # bursts of thousands of queries: do not drop them
            transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        try:
            tcp = await asyncio.start_server(
                lambda r, w: _tcp_client(zone, r, w), host, chosen, reuse_address=True
            )
        except OSError as exc:
            transport.close()
            last = exc
            if port != 0:
                raise
            continue
        return chosen, [transport, tcp]
    raise last or OSError("no free DNS port")


def main(argv: list[str] | None = None) -> None:
    """Serve the zone alone on UDP+TCP: ``HOST PORT LATENCY_MS JITTER LOSS``; prints ``ready PORT``."""
    from pipeline.harness.testbed.model import Web

    host, port, latency_ms, jitter, loss = (argv or sys.argv[1:])[:5]
    zone = Zone(Web(1, 1), latency_ms=float(latency_ms), jitter=float(jitter), loss=float(loss))

    async def serve() -> None:
        chosen, _closers = await start_dns(zone, host, int(port))
        print(f"ready {chosen}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
