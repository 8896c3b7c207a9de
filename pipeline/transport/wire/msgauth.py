"""Signed fleet messages on the wire: which key each process holds, the signature headers, and the checks
the dispatcher (results, heartbeats) and the nodes (batches) make. The HMAC rules are ``signing.py``.

- ``MessageKeys.for_dispatcher(fleet)`` / ``for_node(fleet, node)``: keys from the settings or owner-only
  files (``tls.read_secret``). The dispatcher holds the fleet key; a node its own key (given, or
  derived from a fleet key it was given: the one-machine dev stack). No key at all = signing off,
  which ``require_signing`` allows only with a loopback broker.
- Headers: ``x-crawlfleet-node`` (who signed) and ``x-crawlfleet-sig``. The signature covers the body
  bytes as published (compressed or not), so checking one costs one HMAC of the body.
- ``check_node_message``: the dispatcher's check of a results or heartbeat message: signed with the
  key of the node the header names, and the body names that same node (a node cannot sign for another);
  a ``links`` report on the results queue is signed by ``crawlfleet links`` as ``LINKS_SIGNER``.
- ``check_batch``: a node's check of a task message: signed for this node, and not a replay
  (``signing.ReplayGuard``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from fetchers.records import Batch
from fetchers.schema import SchemaError
from pipeline.settings import FleetSettings
from pipeline.transport.wire import signing
from pipeline.transport.wire.messages import BadMessage, decode
from pipeline.transport.wire.tls import BrokerPolicyError, _parts, is_loopback, read_secret

log = logging.getLogger(__name__)

SIG_HEADER = "x-crawlfleet-sig"
NODE_HEADER = "x-crawlfleet-node"
# The signer name of ``crawlfleet links`` (a central process holding the fleet key): not a valid node
# name (topology.check_name), so no fetch node holds its derived key.
LINKS_SIGNER = ".links"


def _secret(value: str, path: str, *, name: str) -> str:
    if value and path:
        raise BrokerPolicyError(f"fleet.{name} and fleet.{name}_file are both set; give one")
    return read_secret(path, what=f"fleet.{name}_file") if path else value


@dataclass(slots=True)
class MessageKeys:
    """The keys of one process. ``fleet_key``: derive any node's key (the dispatcher); ``own``: the
    key this process signs with as a node. Both empty = unsigned messages (loopback only)."""

    fleet_key: str = ""
    own: str = ""
    _derived: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_dispatcher(cls, fleet: FleetSettings) -> MessageKeys:
        return cls(fleet_key=_secret(fleet.key, fleet.key_file, name="key"))

    @classmethod
    def for_node(cls, fleet: FleetSettings, node: str) -> MessageKeys:
        own = _secret(fleet.node_key, fleet.node_key_file, name="node_key")
        fleet_key = _secret(fleet.key, fleet.key_file, name="key")
        if not own and fleet_key:
            own = signing.node_key(fleet_key, node)
        return cls(own=own)

    @property
    def signing(self) -> bool:
        return bool(self.fleet_key or self.own)

    def key_for(self, node: str) -> str:
        """The key of ``node`` (derived from the fleet key); ``own`` when this process has no fleet key."""
        if not self.fleet_key:
            return self.own
        key = self._derived.get(node)
        if key is None:
            if len(self._derived) > 4096:
                self._derived.clear()
            key = self._derived[node] = signing.node_key(self.fleet_key, node)
        return key


def require_signing(fleet: FleetSettings, keys: MessageKeys) -> None:
    """Refuse to run unsigned unless the broker is on loopback (nothing else can publish to it then)."""
    if not keys.signing and not is_loopback(_parts(fleet.broker_url)[1]):
        raise BrokerPolicyError("a broker off this machine needs signed messages: set fleet.key_file (dispatcher) "
                                "or fleet.node_key_file (node); docs/SECURITY.md")  # fmt: skip


def signed_headers(keys: MessageKeys, *, kind: str, node: str, body: bytes) -> dict[str, str]:
    """The headers that sign ``body`` as ``node``'s ``kind`` message ({} when signing is off)."""
    if not keys.signing:
        return {}
    sig = signing.sign(keys.key_for(node), kind=kind, node=node, body=body)
    return {NODE_HEADER: node, SIG_HEADER: sig}


def _body(raw: Any) -> bytes:
    return raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass")


def check_node_message(keys: MessageKeys, *, kind: str, message: Any, max_bytes: int) -> str | None:
    """None when a ``results``/``heartbeat`` message is signed by the node it speaks for, else why not.
    Always None when this dispatcher holds no key (signing off)."""
    if not keys.signing:
        return None
    headers = message.headers or {}
    node = headers.get(NODE_HEADER)
    if not isinstance(node, str) or not node or len(node) > 64:
        return "unsigned (no node header)"
    body = _body(message.body)
    why = signing.verify(
        keys.key_for(node), kind=kind, node=node, body=body, signature=headers.get(SIG_HEADER)
    )
    if why is not None:
        return f"{why} (claims node {node[:64]!r})"
    try:
        obj = decode(body, content_type=message.content_type, content_encoding=message.content_encoding,
                     max_bytes=max_bytes)  # fmt: skip
    except BadMessage as exc:
        return str(exc)
    if node == LINKS_SIGNER:
        return (
            None
            if obj.get("kind") == "links"
            else f"the links signer sent a {str(obj.get('kind'))[:20]!r} message"
        )
    if obj.get("node") != node:
        return f"signed by node {node!r} but speaks for {str(obj.get('node'))[:64]!r}"
    return None


def links_headers(fleet: FleetSettings, body: bytes) -> dict[str, str]:
    """The headers that sign a ``links`` report of ``crawlfleet links`` (which holds the fleet key)."""
    keys = MessageKeys.for_dispatcher(fleet)
    return signed_headers(keys, kind="results", node=LINKS_SIGNER, body=body)


def check_batch(
    keys: MessageKeys, guard: signing.ReplayGuard | None, *, node: str, message: Any, now: float
) -> str | None:
    """None when a task message is a batch signed for ``node`` and not a replay, else why it is refused.
    Always None when this node holds no key (signing off; loopback only)."""
    if not keys.signing:
        return None
    headers = message.headers or {}
    body = _body(message.body)
    why = signing.verify(keys.own, kind="batch", node=node, body=body, signature=headers.get(SIG_HEADER))
    if why is not None:
        return why
    if guard is None:
        return None
    try:
        batch = Batch.from_json(json.loads(body)[0][0])
    except (SchemaError, TypeError, ValueError, IndexError, KeyError) as exc:
        return f"wrong schema: {exc}"
    redelivered = bool((getattr(message, "delivery_info", None) or {}).get("redelivered"))
    return guard.check(service=batch.service, serial=batch.serial, issued_at=batch.issued_at, now=now,
                       redelivered=redelivered)  # fmt: skip
