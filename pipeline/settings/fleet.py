"""The fleet's broker and its exchanges, segments and node views.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``."""

from __future__ import annotations

from dataclasses import dataclass


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
    # Where the dispatcher tells nodes to write segments ("" = OUT/node-segments).
    segments_dir: str = ""
    # A node's own view of the store and the segments (when its mount point or the HBase address it
    # sees differ from the dispatcher's); "" = as the dispatcher says.
    node_store: str = ""
    node_segments_dir: str = ""
