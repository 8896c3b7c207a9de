"""Signed fleet messages: HMAC-SHA256 over a message's exact bytes, per-node keys, and the replay rule.

Pure: functions of values (the clock is an argument). The wire (headers, settings, files) is in
``wire/msgauth.py``.

- **Keys.** The dispatcher holds the fleet key; each fetch node holds only its own key,
  ``node_key(fleet_key, node)`` (HMAC of the node name under the fleet key). A node can therefore
  neither sign a batch for another node nor pass its results off as another node's; the dispatcher
  derives any node's key when it needs it.
- **What is signed.** ``sign(key, kind, node, body)`` covers a domain tag (``kind``: "batch",
  "results", "heartbeat", or "block": a dispatcher shard's block of hosts on the remote queue, signed by
  the shards' own name under the fleet key), the node name and the message body bytes as published. A batch's body is
  the whole Celery task (serial, issued-at and every URL of the batch, plus its scope and sink: where
  the node writes), so none of it can be changed without the key; the node name binds it to the
  queue it was meant for. A signature is 64 hex digits.
- **Replays.** ``ReplayGuard.check`` refuses a batch whose ``(service, serial, issued_at)`` it has
  seen already (unless the broker marks it a re-delivery, which a publisher cannot forge), one issued
  longer ago than its lease, and one issued implausibly far in the future.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from dataclasses import dataclass, field

KINDS = ("batch", "results", "heartbeat", "block")
SIG_HEX = 64
FUTURE_SKEW_S = 300.0  # clocks of dispatcher and node may differ this much (NTP keeps them far closer)


def node_key(fleet_key: str, node: str) -> str:
    """The key node ``node`` holds, derived from the fleet key (hex text; used as UTF-8 bytes)."""
    if not fleet_key:
        raise ValueError("an empty fleet key derives no node key")
    return hmac.new(fleet_key.encode(), b"crawlfleet-node-key\0" + node.encode(), hashlib.sha256).hexdigest()


def sign(key: str, *, kind: str, node: str, body: bytes) -> str:
    """The signature of a ``kind`` message of ``node`` whose body is ``body`` (hex)."""
    if kind not in KINDS:
        raise ValueError(f"unknown message kind {kind!r}")
    if not key:
        raise ValueError("cannot sign with an empty key")
    mac = hmac.new(key.encode(), f"crawlfleet-{kind}-v1\0{node}\0".encode(), hashlib.sha256)
    mac.update(body)
    return mac.hexdigest()


def verify(key: str, *, kind: str, node: str, body: bytes, signature: object) -> str | None:
    """None when ``signature`` is ``sign(key, ...)`` of these values, else why not (for the log)."""
    if signature is None or signature == "":
        return "unsigned"
    if not isinstance(signature, str) or len(signature) != SIG_HEX:
        return "malformed signature"
    if not hmac.compare_digest(sign(key, kind=kind, node=node, body=body), signature.lower()):
        return "bad signature"
    return None


@dataclass(slots=True)
class ReplayGuard:
    """The batches one node has accepted, to refuse the same batch published again (bounded memory)."""

    max_age_s: float
    memory: int = 100_000
    _seen: OrderedDict[tuple[str, int, float], None] = field(default_factory=OrderedDict)

    def check(
        self, *, service: str, serial: int, issued_at: float, now: float, redelivered: bool
    ) -> str | None:
        """None to accept (and remember) the batch, else why it is refused. A broker re-delivery of a
        batch seen before is accepted: the runtime joins or answers it without fetching twice."""
        age = now - issued_at
        if age > self.max_age_s:
            return f"replayed: issued {age:.0f}s ago, older than its {self.max_age_s:.0f}s lease"
        if age < -FUTURE_SKEW_S:
            return f"issued {-age:.0f}s in the future"
        key = (service, serial, issued_at)
        if key in self._seen:
            if redelivered:
                return None
            return f"replayed: batch {service}/{serial} was accepted before"
        self._seen[key] = None
        while len(self._seen) > self.memory:
            self._seen.popitem(last=False)
        return None
