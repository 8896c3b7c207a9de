"""Blocking resolvers behind the same async interface as :class:`AresResolver`, for comparison.

Both run their blocking calls in a thread pool (10 threads by default, as Scrapy's resolver pool):

* :class:`GetaddrinfoResolver` calls ``socket.getaddrinfo``: the system resolver, as a crawler on
  ``gethostbyname`` sees it (S4's baseline). It cannot be pointed at a server or a port and it
  reports no TTL.
* :class:`UdpBlockingResolver` sends one RFC 1035 query over a blocking UDP socket per call (dnslib
  builds and parses it) to a given ``HOST:PORT``. It stands in for getaddrinfo when the server under
  test listens on a non-standard port (getaddrinfo only speaks to port 53 of resolv.conf's servers):
  one thread blocked per look-up, exactly the serialization S4 measures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import socket
from collections.abc import Callable
from typing import TypeVar

from dnslib import QTYPE, RCODE, DNSRecord
from dnslib import DNSError as DnslibError

from pipeline.dns.errors import Answer, DnsError
from pipeline.dns.resolver import parse_server

_T = TypeVar("_T")

_GAI_KINDS = {
    socket.EAI_NONAME: "nxdomain",
    socket.EAI_AGAIN: "timeout",
    socket.EAI_FAIL: "servfail",
}
_NODATA = getattr(socket, "EAI_NODATA", None)
if _NODATA is not None:
    _GAI_KINDS[_NODATA] = "no_address"
_ADDRFAMILY = getattr(socket, "EAI_ADDRFAMILY", None)
if _ADDRFAMILY is not None:
    _GAI_KINDS[_ADDRFAMILY] = "no_address"

_RCODE_KINDS = {
    RCODE.NXDOMAIN: "nxdomain",
    RCODE.SERVFAIL: "servfail",
    RCODE.REFUSED: "refused",
    RCODE.FORMERR: "malformed",
    RCODE.NOTIMP: "refused",
}


class _ThreadPoolResolver:
    """Common part: a private thread pool and the queries counter."""

    def __init__(self, *, threads: int = 10) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dns")
        self.queries_sent = 0

    async def _run(self, fn: Callable[..., _T], *args: object) -> _T:
        self.queries_sent += 1
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class GetaddrinfoResolver(_ThreadPoolResolver):
    """``socket.getaddrinfo`` in a thread pool. TTLs are unknown (``ttl_s=None``)."""

    async def query(self, host: str, family: int = socket.AF_INET) -> Answer:
        return await self._run(self.query_sync, host, family)

    @staticmethod
    def query_sync(host: str, family: int = socket.AF_INET) -> Answer:
        try:
            infos = socket.getaddrinfo(host, None, family, socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise DnsError(_GAI_KINDS.get(exc.errno or 0, "servfail"), str(exc), host=host) from exc
        except UnicodeError as exc:
            raise DnsError("malformed", str(exc), host=host) from exc
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos if info[0] == family))
        if not addresses:
            raise DnsError("no_address", host=host)
        return Answer(addresses, None)


class UdpBlockingResolver(_ThreadPoolResolver):
    """Blocking UDP queries to one ``HOST:PORT`` in a thread pool, with timeout and retries."""

    def __init__(self, server: str, *, timeout_s: float = 2.0, tries: int = 3, threads: int = 10) -> None:
        super().__init__(threads=threads)
        spec = parse_server(server)
        if spec.startswith("["):
            host, _, port = spec[1:].partition("]")
            port = port.lstrip(":")
            self._family = socket.AF_INET6
        else:
            host, _, port = spec.partition(":")
            self._family = socket.AF_INET
        self._addr = (host, int(port or 53))
        self._timeout_s = timeout_s
        self._tries = max(1, tries)

    async def query(self, host: str, family: int = socket.AF_INET) -> Answer:
        return await self._run(self.query_sync, host, family)

    def query_sync(self, host: str, family: int = socket.AF_INET) -> Answer:
        qtype = "AAAA" if family == socket.AF_INET6 else "A"
        try:
            request = DNSRecord.question(host, qtype)
        except (DnslibError, UnicodeError, ValueError) as exc:
            raise DnsError("malformed", str(exc), host=host) from exc
        request.header.id = random.randrange(65536)
        payload = request.pack()
        with socket.socket(self._family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(self._timeout_s)
            sock.connect(self._addr)
            for _ in range(self._tries):
                sock.send(payload)
                try:
                    while True:
                        data = sock.recv(4096)
                        if len(data) >= 2 and data[:2] == payload[:2]:
                            break
                except TimeoutError:
                    continue
                except ConnectionRefusedError as exc:
                    raise DnsError("refused", "port unreachable", host=host) from exc
                return self._parse(host, qtype, data)
        raise DnsError("timeout", f"{self._tries} tries", host=host)

    @staticmethod
    def _parse(host: str, qtype: str, data: bytes) -> Answer:
        try:
            reply = DNSRecord.parse(data)
        except (DnslibError, ValueError, IndexError) as exc:
            raise DnsError("malformed", str(exc), host=host) from exc
        rcode = reply.header.rcode
        if rcode != RCODE.NOERROR:
            raise DnsError(_RCODE_KINDS.get(rcode, "servfail"), RCODE.get(rcode), host=host)
        if reply.header.tc:
            raise DnsError("malformed", "truncated reply (no TCP fallback here)", host=host)
        want = getattr(QTYPE, qtype)
        records = [rr for rr in reply.rr if rr.rtype == want]
        if not records:
            raise DnsError("no_address", host=host)
        return Answer(tuple(str(rr.rdata) for rr in records), min(rr.ttl for rr in records))
