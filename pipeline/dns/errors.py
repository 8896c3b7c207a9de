"""The DNS layer's value types: the error every resolver raises and the answer every upstream returns."""

from __future__ import annotations

from dataclasses import dataclass

#: The closed set of failure kinds; callers branch on these strings, never on library error codes.
KINDS = frozenset({"nxdomain", "servfail", "timeout", "malformed", "refused", "no_address"})


class DnsError(Exception):
    """A name did not resolve. ``kind`` is one of :data:`KINDS`.

    ``cached`` is True when the answer came from the negative cache rather than from a server.
    """

    def __init__(self, kind: str, message: str = "", *, host: str = "", cached: bool = False) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown DNS error kind {kind!r}")
        super().__init__(f"{kind}: {host} {message}".strip())
        self.kind = kind
        self.host = host
        self.cached = cached


@dataclass(frozen=True, slots=True)
class Answer:
    """Addresses of one family for one name, as text, with the smallest TTL seen in the answer.

    ``ttl_s`` is None when the source gives no TTL (getaddrinfo); the policy then applies its minimum.
    """

    addresses: tuple[str, ...]
    ttl_s: int | None
