"""The fleet's broker and its exchanges, segments and node views; TLS to the broker and the message keys.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``.

Secrets (the broker password, ``key``, ``node_key``) come from the environment, a settings file or a
``*_file`` with owner-only permissions (``pipeline.transport.wire.tls.read_secret``), never from a flag;
``SECRET_FIELDS`` names them for the redaction of ``crawlfleet settings``, logs and reports
(``pipeline.settings.security.redact``)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

# Fields whose value is a secret (shown as "***" wherever settings are printed).
SECRET_FIELDS = frozenset({"fleet.key", "fleet.node_key"})
# Fields that may carry a password inside a URL (the password is shown as "***").
URL_FIELDS = frozenset({"fleet.broker_url"})


# Storage a fleet's machines share, named by URI (pipeline/storage/uris.py opens them).
STORAGE_SCHEMES = ("file", "hdfs", "webhdfs", "s3")


def storage_uri_ok(text: str) -> bool:
    """An absolute path, or a URI of a storage scheme naming a host or bucket (``file:///`` a path)."""
    if text.startswith("/"):
        return True
    parts = urlsplit(text)
    if parts.scheme == "file":
        return not parts.netloc and parts.path.startswith("/")
    return parts.scheme in STORAGE_SCHEMES and bool(parts.netloc)


@dataclass(frozen=True, slots=True)
class FleetSettings:
    broker_url: str = "amqp://guest:guest@127.0.0.1:5672//"
    results_exchange: str = "crawlfleet.results"
    heartbeat_exchange: str = "crawlfleet.heartbeats"
    max_message_bytes: int = 64 * 1024 * 1024
    # Celery task events make the workers visible to Flower; off by default because they add about
    # three broker messages per batch (roughly doubling the fleet's message rate).
    task_events: bool = False
    # The dispatcher's AMQP client (docs/bench/amqp.md): "pika" (pika's own loop, publisher confirms
    # pipelined; measured faster) or "kombu" (py-amqp, each publish waits for its confirm). Fetch nodes
    # are Celery workers on kombu either way.
    amqp_client: str = "pika"
    # Where the dispatcher tells nodes to write segments: a directory, or a URI every machine of the
    # fleet opens (file:///, hdfs://NAMENODE:PORT/PATH, s3://BUCKET/PATH; pipeline/storage/uris.py).
    # "" = the directory OUT/node-segments (one machine).
    segments_dir: str = ""
    # Merged segments: 0 = deleted once their round is reported (the pages are in the store: bodies
    # stored once), > 0 = kept under .done/ this many seconds, < 0 = kept for ever.
    segment_retention_s: float = 0.0
    # A fetch node stores and reports a running batch's results in chunks: a finished result waits at
    # most this long (seconds) for its chunk's write to start, so a killed node costs only its requests in
    # flight and those finished within this plus one write; 0 = once, when the batch ends.
    progress_s: float = 0.5
    # A `crawlfleet links` process holds each round it runs by a lease in the store; a killed process's
    # round is taken over by another this long after its last renewal.
    link_lease_s: float = 60.0
    # A fetch node lowers its CPU priority by this much (``nice``, 0-19) when it starts; its parse
    # processes inherit it. On a machine that also runs ``crawlfleet links`` and the store, the link rounds
    # then take the CPU they need first: a page's links reach the pending set in seconds rather than
    # queuing behind fetches, at some of the crawl's pages/s (docs/FLEET.md, "One machine: pages/s or
    # link lag"). 0 = as started (the dev stack's, and a node's on a machine of its own).
    node_nice: int = 0
    # A node's own view of the store and the segments (when its mount point or the HBase address it
    # sees differ from the dispatcher's); "" = as the dispatcher says.
    node_store: str = ""
    node_segments_dir: str = ""
    # The broker password from a file (owner-only permissions), for a broker URL that carries none.
    broker_password_file: str = ""
    # TLS to the broker (amqps://, docs/SECURITY.md): the CA that signed the broker's certificate, and
    # this process's client certificate and key (the broker verifies peers). Plain amqp:// is refused
    # unless the broker host is loopback.
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    # Signed batches and results (docs/SECURITY.md): the fleet key (the dispatcher's; each node's key is
    # derived from it and the node name: `crawlfleet`'s scripts/rabbit-users.sh prints them). "" = no
    # signing, allowed only with a loopback broker. key_file: the same from an owner-only file.
    key: str = ""
    key_file: str = ""
    # A fetch node's own key (derived from the fleet key for its name); "" = derive it from `key`.
    node_key: str = ""
    node_key_file: str = ""
