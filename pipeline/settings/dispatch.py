"""The dispatcher: S3 batch sizing, S1 heartbeats, quotas, the active-host window.

One section of :class:`pipeline.settings.Settings`; read only through ``load_settings``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    k: int = 64  # S3 base batch size
    n_min: int = 8
    n_max: int = 512
    history_window: int = 16  # S3 vertical comparison: mean of the last N rounds
    # t_i weighs a batch 0.5 ** (age / half-life) (in batches) within the window, so it forgets the start
    # and follows a node that changes speed (sizing.py); 0 = every batch in the window alike.
    history_halflife: float = 2.0
    heartbeat_s: float = 2.0
    missed_heartbeats: int = 2  # S1
    lease_s: float = 120.0
    quotas_file: str = ""  # S1 quota list (TOML, service -> URLs/s); "" = unlimited
    # Deviation from S1, off by default: cut a batch to the quota budget instead of refusing it.
    quota_shrink: bool = False
    # S1's serial-id check: a fleet node asks the dispatcher before fetching a batch (serialcheck.py).
    serial_check: bool = True
    service: str = "default"
    # Hosts the frontier works on at once, at least; more are activated whenever none of them is ready
    # (pipeline/frontier/activehosts.py). 0 = every host with pending URLs.
    active_hosts: int = 64
    # An active host yields its place to a waiting one after this many URLs (0 = only when drained).
    host_session_urls: int = 2048
    # The order of a host's pending URLs (#23 point 5): "inlinks" = most linked-to first, depth as the
    # tie-break (both scales then count in-links of known URLs: the embedded core, the fleet's link jobs);
    # "depth" = shallowest first, the store's order. Politeness is the same either way.
    priority: str = "inlinks"
    # Dispatcher shards (S5's peers, docs/FLEET.md "Dispatcher shards"): this many dispatcher processes share
    # one service, each owning whole hosts; this process is shard ``shard`` (0..shards-1). 1 = one dispatcher.
    shards: int = 1
    shard: int = 0
    # S5's double buffer between shards: a shard with more ready URLs than its peers pushes whole hosts from
    # its queue's tail to the service's remote queue in blocks of about this many URLs; one short of work
    # pulls a block (pipeline/dispatch/vessels.py). Checked every shard_heartbeat_s, on loads smoothed over
    # the last shard_window heartbeats; shard_balance = false turns the rule off (the measured baseline).
    shard_block_urls: int = 512
    shard_heartbeat_s: float = 2.0
    shard_window: int = 3
    shard_balance: bool = True
