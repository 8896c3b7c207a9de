"""DNS wire format for the bottom-level server (:mod:`pipeline.dns.server`), on dnslib: pure functions.

The server speaks just enough DNS for a crawler's nodes: one question per query, A and AAAA in the
IN class answered from the shared cache, every other type answered NOTIMP, and one CHAOS TXT name,
``stats.dqcache.``, whose answer is the server's counters as one JSON string (the way unbound
answers ``version.bind``), so a test or an operator reads them over DNS itself.

Contracts:

* :func:`parse_query` returns None for anything that is not a well-formed single-question query
  (a reply, junk, a truncated datagram); the server drops those without answering.
* :func:`reply_bytes` packs a reply; on UDP it never exceeds the client's limit (512 bytes, or the
  EDNS payload size the query advertises, at most 1232): a longer reply is sent with the TC bit
  and no records, and the client asks again over TCP, which carries the whole answer.
"""

from __future__ import annotations

import json
import random
import socket
from dataclasses import dataclass

from dnslib import AAAA, CLASS, QTYPE, RCODE, RR, TXT, A, DNSError, DNSHeader, DNSRecord

STATS_NAME = "stats.dqcache."
UDP_MIN = 512
UDP_MAX = 1232  # the DNS flag day 2020 figure: no IP fragmentation on any usual path

#: The failure kinds of :class:`pipeline.dns.errors.DnsError` as response codes. A name without an
#: address of the asked family is NOERROR with no answer (NODATA); every failure of the layer above
#: is SERVFAIL, so a node never mistakes an outage for a fact about the name.
RCODE_OF_KIND = {
    "nxdomain": RCODE.NXDOMAIN,
    "no_address": RCODE.NOERROR,
    "servfail": RCODE.SERVFAIL,
    "timeout": RCODE.SERVFAIL,
    "refused": RCODE.SERVFAIL,
    "malformed": RCODE.SERVFAIL,
}


@dataclass(frozen=True, slots=True)
class Query:
    """One parsed question: ``name`` without the trailing dot, ``qtype`` as dnslib's number."""

    record: DNSRecord
    name: str
    qtype: int
    qclass: int
    udp_limit: int

    @property
    def family(self) -> int | None:
        """AF_INET for A, AF_INET6 for AAAA (class IN), None for anything else."""
        if self.qclass != CLASS.IN:
            return None
        return {QTYPE.A: socket.AF_INET, QTYPE.AAAA: socket.AF_INET6}.get(self.qtype)

    @property
    def is_stats(self) -> bool:
        return self.qclass == CLASS.CH and self.qtype == QTYPE.TXT and self.name.lower() + "." == STATS_NAME


def parse_query(data: bytes) -> Query | None:
    """The query in ``data``, or None when it is not one well-formed question."""
    if len(data) < 12 or data[2] & 0x80:  # too short, or a reply (QR set) sent to us
        return None
    try:
        record = DNSRecord.parse(data)
    except (DNSError, ValueError, IndexError, UnicodeError):
        return None
    if record.header.opcode != 0 or len(record.questions) != 1:
        return None
    q = record.questions[0]
    limit = UDP_MIN
    for rr in record.ar:
        if rr.rtype == QTYPE.OPT:
            limit = max(UDP_MIN, min(int(rr.rclass), UDP_MAX))
    return Query(record, str(q.qname).rstrip("."), int(q.qtype), int(q.qclass), limit)


def _reply(query: Query, rcode: int) -> DNSRecord:
    header = DNSHeader(id=query.record.header.id, qr=1, aa=0, ra=1, rd=query.record.header.rd, rcode=rcode)
    return DNSRecord(header, q=query.record.q)


def answer_reply(query: Query, addresses: list[str], ttl_s: int) -> DNSRecord:
    """A NOERROR reply carrying ``addresses`` (of the query's family) with ``ttl_s``."""
    reply = _reply(query, RCODE.NOERROR)
    rdata = AAAA if query.qtype == QTYPE.AAAA else A
    for address in addresses:
        reply.add_answer(RR(query.record.q.qname, query.qtype, rdata=rdata(address), ttl=max(0, ttl_s)))
    return reply


def error_reply(query: Query, kind: str) -> DNSRecord:
    """The reply for a failure of ``kind`` (see :data:`RCODE_OF_KIND`)."""
    return _reply(query, RCODE_OF_KIND.get(kind, RCODE.SERVFAIL))


def notimp_reply(query: Query) -> DNSRecord:
    return _reply(query, RCODE.NOTIMP)


def stats_reply(query: Query, counters: dict[str, int]) -> DNSRecord:
    reply = _reply(query, RCODE.NOERROR)
    text = json.dumps(counters, sort_keys=True, separators=(",", ":")).encode()
    chunks = [text[i : i + 255] for i in range(0, len(text), 255)]  # a TXT string holds 255 bytes
    reply.add_answer(RR(STATS_NAME, QTYPE.TXT, rclass=CLASS.CH, rdata=TXT(chunks), ttl=0))
    return reply


def reply_bytes(reply: DNSRecord, *, udp_limit: int | None) -> tuple[bytes, bool]:
    """(packed reply, truncated). ``udp_limit`` None means TCP (no limit but the 64 KiB frame)."""
    data = bytes(reply.pack())
    if udp_limit is None or len(data) <= udp_limit:
        return data, False
    short = DNSRecord(reply.header, q=reply.q)
    short.header.tc = 1
    return bytes(short.pack()), True


def ask_stats(server: tuple[str, int], *, timeout_s: float = 2.0, tries: int = 3) -> dict[str, int]:
    """The counters of a running server, asked over TCP (so no reply is truncated or lost)."""
    query = DNSRecord.question(STATS_NAME, "TXT", "CH")
    query.header.id = random.randrange(65536)
    payload = query.pack()
    last: OSError | None = None
    for _ in range(max(1, tries)):
        try:
            with socket.create_connection(server, timeout=timeout_s) as sock:
                sock.sendall(len(payload).to_bytes(2, "big") + payload)
                size = int.from_bytes(_read(sock, 2), "big")
                reply = DNSRecord.parse(_read(sock, size))
            break
        except OSError as exc:
            last = exc
    else:
        raise last or OSError("no answer")
    text = b"".join(bytes(part) for rr in reply.rr for part in rr.rdata.data)
    out: dict[str, int] = json.loads(text)
    return out


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data
