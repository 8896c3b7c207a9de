"""``crawlfleet dispatcher``, ``crawlfleet worker`` and ``crawlfleet submit``: fleet mode (see docs/FLEET.md).

- ``crawlfleet dispatcher [SEEDS...] --out DIR [--service NAME] [--resume] [--serve]`` runs the central
  dispatcher for one service until the crawl is done (``--serve``: keep waiting for submits).
- ``crawlfleet worker --node NAME [--slots N]`` becomes ``celery -A pipeline.transport.node.celery_app worker
  -Q fetch.NAME --pool threads -c N`` (exec, so signals reach Celery directly).
- ``crawlfleet submit --service NAME SEEDS...`` hands seed URLs to that service's dispatcher.
- ``crawlfleet links --service NAME --out DIR [--runner R]`` runs the link jobs over the nodes' segments
  (links/service.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fetchers.choice import DEFAULT as DEFAULT_FETCHER
from fetchers.choice import KINDS
from pipeline.observe import logs
from pipeline.observe.errors import UsageError, int_at_least, port
from pipeline.settings import Settings, arg_type, check_settings, load_settings
from pipeline.urls import normalize

log = logging.getLogger(__name__)


def _name(what: str) -> Any:
    """An argparse ``type=`` for a node or service name (it becomes a queue name)."""

    def parse(text: str) -> str:
        from pipeline.transport.wire import topology

        try:
            return topology.check_name(text, what=what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()


def _broker_url(text: str) -> str:
    """An argparse ``type=`` for ``--broker-url``: a password in a flag shows in ``ps`` to every user of the
    machine, so it is refused (the message shows the URL with the password masked)."""
    if urlsplit(text).password:
        raise argparse.ArgumentTypeError(
            f"{_redacted(text)} carries a password, which ps shows to everyone: give it in "
            "CRAWLFLEET_BROKER_URL, the settings file or fleet.broker_password_file (docs/SECURITY.md)")
    return text


def _seed(text: str) -> str:
    """An argparse ``type=`` for a seed URL."""
    if not normalize(text):
        raise argparse.ArgumentTypeError(f"expected an http(s) URL like https://example.com/, got {text!r}")
    return text


def register(subparsers: Any) -> None:
    from pipeline.crawl.flags import add_crawl_flags
    from pipeline.storage.factory import DEFAULT_CRAWL_DIR

    d = subparsers.add_parser("dispatcher", help="run the fleet dispatcher (RabbitMQ + Celery workers)")
    d.add_argument("seeds", nargs="*", type=_seed, help="seed URLs (or submit them later with `crawlfleet submit`)")
    add_crawl_flags(d)
    _fleet_flags(d)
    d.add_argument("--resume", action="store_true", help="continue the crawl in --out after a stop or crash")
    d.add_argument("--serve", action="store_true", help="keep running when the crawl is done (for submits)")
    d.add_argument("--continuous", action="store_true",
                   help="keep the collection fresh: re-fetch URLs as they fall due (recrawl settings) until "
                        "Ctrl-C or --stop-file (as CRAWLFLEET_RECRAWL_CONTINUOUS=1)")  # fmt: skip
    d.add_argument("--stop-file", default=None, metavar="FILE",
                   help="with --continuous: end cleanly once FILE exists (resume later with --resume)")  # fmt: skip
    d.add_argument("--metrics-port", type=port, default=None,
                   help="serve Prometheus /metrics and an HTML /status page on 127.0.0.1:PORT (0 = any free port)")
    d.add_argument("--shards", type=arg_type("dispatch.shards"), default=None, metavar="N",
                   help="S5: N dispatcher processes share the service, each owning whole hosts (needs the HBase "
                        "store); give each the same --out and its own --shard")  # fmt: skip
    d.add_argument("--shard", type=arg_type("dispatch.shard"), default=None, metavar="I",
                   help="with --shards: this process is shard I (0..N-1); its files go to OUT/shard-I")
    if not any("--log-level" in a.option_strings for a in d._actions):  # add_crawl_flags may include them
        logs.add_arguments(d)
    d.set_defaults(func=_cmd_dispatcher)

    w = subparsers.add_parser("worker", help="run a Celery fetch worker for one node")
    w.add_argument("--node", required=True, type=_name("node"),
                   help="node name; the worker consumes the queue fetch.NODE")
    w.add_argument("--slots", type=int_at_least(1), default=None,
                   help="batches run at once (Celery -c); default from settings")
    w.add_argument("--config", help="TOML settings file")
    w.add_argument("--dns-server", type=arg_type("dns.servers"), action="append", default=None, metavar="HOST:PORT",
                   help="DNS server the node asks, repeatable (default: the system's resolv.conf)")
    w.add_argument("--allow-network", type=arg_type("security.allow_networks"), action="append", default=None,
                   metavar="CIDR", help="exempt this network from the SSRF guard (e.g. 127.0.0.0/8 for the testbed)")
    w.add_argument("--fetcher", choices=KINDS, default=DEFAULT_FETCHER,
                   help=f"{DEFAULT_FETCHER} (the default); h1: the lean HTTP/1.1 client, aio: aiohttp's (both "
                        "event-driven); threaded: requests-futures (for adapters, proxies, auth)")
    w.add_argument("--loglevel", default="INFO", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="Celery's log level")
    _fleet_flags(w, service=False)
    w.add_argument("celery_args", nargs=argparse.REMAINDER, help="extra arguments for `celery worker` after --")
    w.set_defaults(func=_cmd_worker)

    lk = subparsers.add_parser("links", help="the fleet's link jobs: node segments -> mrjob -> pending set")
    lk.add_argument("--out", default=DEFAULT_CRAWL_DIR,
                    help="the dispatcher's crawl directory (store and segments); default %(default)s, as the dispatcher's")
    lk.add_argument("--config", help="TOML settings file (the dispatcher's)")
    lk.add_argument("--runner", choices=("inline", "local", "spark", "hadoop", "emr"), default="inline",
                    help="where mrjob runs the jobs (default inline: in this process)")
    lk.add_argument("--work-dir", type=Path, default=Path("var/jobs"), help="scratch directory of the jobs")
    lk.add_argument("--spark-master", default="local[2]", help="Spark master URL for --runner spark")
    lk.add_argument("--conf-path", help="mrjob.conf (e.g. for EMR; see docs/mrjob.emr.conf.example)")
    lk.add_argument("--max-segments", type=int_at_least(1), default=256, help="segments per micro-batch")
    lk.add_argument("--shards", type=arg_type("dispatch.shards"), default=None, metavar="N",
                    help="the dispatcher runs as N shards: each host's new URLs go to the shard that owns it")
    _fleet_flags(lk)
    logs.add_arguments(lk)
    lk.set_defaults(func=_cmd_links)

    s = subparsers.add_parser("submit", help="submit seed URLs to a fleet dispatcher's service")
    s.add_argument("--service", required=True, type=_name("service"), help="the dispatcher's service name")
    s.add_argument("--broker-url", default=None, type=_broker_url,
                   help="AMQP URL without a password (default: settings / CRAWLFLEET_BROKER_URL)")
    s.add_argument("--config", help="TOML settings file")
    s.add_argument("seeds", nargs="+", type=_seed, help="seed URLs to add to the crawl")
    s.set_defaults(func=_cmd_submit)


def _fleet_flags(p: argparse.ArgumentParser, *, service: bool = True) -> None:
    if service:
        p.add_argument("--service", default=None, type=_name("service"),
                       help="service name (quota list key; results queue)")
    p.add_argument("--broker-url", default=None, type=_broker_url,
                   help="AMQP URL without a password (default: settings / CRAWLFLEET_BROKER_URL)")
    p.add_argument("--heartbeat-s", type=arg_type("dispatch.heartbeat_s"), default=None,
                   help="heartbeat period in seconds (S1)")


def _fleet_overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    return {
        "fleet": {"broker_url": args.broker_url},
        "dispatch": {"service": getattr(args, "service", None), "heartbeat_s": getattr(args, "heartbeat_s", None),
                     "shards": getattr(args, "shards", None), "shard": getattr(args, "shard", None)},
    }


def _cmd_dispatcher(args: argparse.Namespace) -> int:
    from pipeline.transport.dispatcher.service import FleetDispatcher

    logs.setup_from_args(args)
    seeds = list(args.seeds)
    out = Path(args.out)
    if not seeds and not args.resume and not args.serve:
        print("crawlfleet dispatcher: give seed URLs, --resume or --serve", file=sys.stderr)
        return 2
    settings, done = _resumed_settings(args, out, seeds)
    if done:
        print(done, file=sys.stderr)
        return 0
    from pipeline.crawl.flags import continuous_run

    settings = continuous_run(args, settings)  # for this run only, not remembered, as `crawl --continuous`
    settings, own = shard_dirs(settings, out)
    service = FleetDispatcher(settings, out_dir=own, seeds=seeds, resume=args.resume, serve=args.serve,
                              metrics_port=args.metrics_port)  # fmt: skip
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: service.stop())
    from pipeline.crawl import gcpolicy

    gcpolicy.tune_for_crawl()  # a long-lived process with the crawl core's heap (see gcpolicy)
    summary = service.run()
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    elif not summary or summary.get("interrupted") is True and "pages_fetched" not in summary:
        print("dispatcher stopped before a crawl started")
    else:
        for key in ("pages_fetched", "pages_failed", "elapsed_s", "pages_per_s"):
            print(f"{key:16} {summary.get(key)}")
    from pipeline.observe.verdict import held_by_cap, nothing_due

    # A resume that only capped hosts could feed, or a re-crawl's with nothing due, ends with 0 pages: say
    # why, as `crawl` does. Exit 0 either way: a fleet dispatcher that fetched nothing is not a failure
    # (`--serve` may wait for seeds).
    cap, continuous = settings.scope.max_pages_per_host, settings.recrawl.continuous
    if summary and (why := held_by_cap(summary, cap=cap) or nothing_due(summary, continuous=continuous)):
        print(why, file=sys.stderr)
    return 0


def shard_dirs(settings: Settings, out: Path) -> tuple[Settings, Path]:
    """With dispatcher shards, every shard is given the crawl's ``--out``: its own files (events, summary,
    journal) go to OUT/shard-I, and the nodes' segments, which one link-jobs service reads for all shards,
    to OUT/node-segments unless ``fleet.segments_dir`` names a place. One dispatcher: ``out`` itself."""
    import dataclasses

    d = settings.dispatch
    if d.shards <= 1:
        return settings, out
    check_settings(settings)  # shards need the HBase store: one line before anything starts
    if not settings.fleet.segments_dir:
        fleet = dataclasses.replace(settings.fleet, segments_dir=str((out / "node-segments").resolve()))
        settings = dataclasses.replace(settings, fleet=fleet)
    return settings, out / f"shard-{d.shard}"


def _check_node_broker(settings: Settings, node: str) -> None:
    """The broker checks the node's Celery app makes (``celery_app.configure``), made here first: a refused
    broker URL (plain AMQP off loopback, amqps:// without its CA) or an unsigned node off loopback is one
    line and exit 2, not a traceback from inside Celery after the exec."""
    from pipeline.transport.wire import tls
    from pipeline.transport.wire.msgauth import MessageKeys, require_signing

    try:
        tls.check_broker(settings.fleet)
        require_signing(settings.fleet, MessageKeys.for_node(settings.fleet, node))
    except tls.BrokerPolicyError as exc:
        raise UsageError(str(exc)) from None


def worker_command(args: argparse.Namespace, settings: Settings) -> tuple[list[str], dict[str, str]]:
    """The celery command line and environment for ``crawlfleet worker`` (pure, for tests)."""
    from pipeline.transport.wire import topology

    node = topology.check_name(args.node, what="node")
    slots = args.slots or default_slots(settings)
    env = dict(os.environ)
    env["CRAWLFLEET_NODE"] = node
    env["CRAWLFLEET_NODE_FETCHER"] = getattr(args, "fetcher", DEFAULT_FETCHER)
    if args.config:
        env["CRAWLFLEET_CONFIG"] = str(Path(args.config).resolve())
    if args.broker_url:
        env["CRAWLFLEET_BROKER_URL"] = args.broker_url
    if args.dns_server:
        env["CRAWLFLEET_DNS_SERVERS"] = ",".join(args.dns_server)
    if args.allow_network:
        env["CRAWLFLEET_SECURITY_ALLOW_NETWORKS"] = ",".join(args.allow_network)
    if args.heartbeat_s:
        env["CRAWLFLEET_DISPATCH_HEARTBEAT_S"] = str(args.heartbeat_s)
    extra = [a for a in (args.celery_args or []) if a != "--"]
    cmd = [
        sys.executable, "-m", "celery", "-A", "pipeline.transport.node.celery_app", "worker",
        "-Q", topology.fetch_queue_name(node), "--pool", "threads", "-c", str(slots),
        "-n", f"{node}@%h", "--without-mingle", "--without-gossip", "--without-heartbeat",
        "-l", args.loglevel, *extra,
    ]  # fmt: skip
    return cmd, env


def default_slots(settings: Settings) -> int:
    """As many batches at once as keep ``fetch.concurrency`` sockets busy under the per-host limits."""
    from pipeline.dispatch.sizing import local_slots

    return local_slots(settings)


def _resumed_settings(args: argparse.Namespace, out: Path, seeds: list[str]) -> tuple[Settings, str]:
    """The dispatcher's settings: on ``--resume`` the crawl directory's remembered ones under file, env
    and flags (each override logged), with ``--max-pages`` a total over every run of the crawl; and
    why there is nothing to do, or ''. The settings are remembered for the next resume (not ``fleet``:
    its broker URL may hold a password)."""
    import dataclasses

    from pipeline.crawl import remember
    from pipeline.crawl.flags import check_stop_file, loaded_from_args, plugins_of

    memory = remember.load(out) if args.resume and out.is_dir() else None
    loaded = loaded_from_args(args, remembered=memory.settings if memory else None)
    for override in remember.overrides(memory.settings, loaded) if memory else []:
        log.info(override.line())
    settings = loaded.settings.with_overrides(_fleet_overrides(args))
    check_stop_file(args, settings)  # before anything is written
    plugins_of(settings)  # a plugin that cannot be used is one line here, not a failing link job later
    holds = memory is not None or (out / "crawl.db").exists()
    if args.resume and not holds and not seeds and not args.serve and settings.store.kind == "sqlite":
        # as `crawl --resume`: a mistyped --out must not leave a dispatcher waiting for a crawl that is elsewhere
        raise UsageError(f"--resume: {out} holds no crawl (no crawl.db); give seed URLs to start one there")
    total = settings.scope.max_pages
    # HBase's counters may have drifted in the faults a resume follows: made exact even without a total,
    # for the run's own summary.
    if args.resume and (total or settings.store.kind == "hbase"):
        settled = _settled(settings, out)
        if total and settled >= total:
            return settings, (f"crawlfleet dispatcher: {out} has settled {settled} URLs, --max-pages is {total} "
                              "in all; raise --max-pages to go on")  # fmt: skip
        if total:
            settings = dataclasses.replace(settings, scope=dataclasses.replace(settings.scope, max_pages=total - settled))
    out.mkdir(parents=True, exist_ok=True)
    remember.save(out, loaded.settings, seeds + (memory.seeds if memory else []))
    return settings, ""


def _settled(settings: Settings, out: Path) -> int:
    """URLs the crawl's earlier runs settled (DONE, FAILED, BLOCKED), from counts made exact first
    (``Store.reconcile_counts``)."""
    from pipeline.storage.base import settled
    from pipeline.storage.factory import from_settings

    store = from_settings(settings.store, out / "crawl.db")
    try:
        store.reconcile_counts()
        counts = store.counts()
    finally:
        store.close()
    return settled(counts)


def _cmd_worker(args: argparse.Namespace) -> int:
    settings = load_settings(args.config, overrides=_fleet_overrides(args))
    cmd, env = worker_command(args, settings)
    _check_node_broker(settings, args.node)
    if settings.fleet.node_nice:  # kept across exec, inherited by the parse processes
        os.nice(settings.fleet.node_nice)
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


def _cmd_links(args: argparse.Namespace) -> int:
    from jobs.runnerconfig import RunnerConfig
    from pipeline.transport.links.publish import amqp_publisher
    from pipeline.transport.links.service import LinkJobsService
    from pipeline.transport.wire.sink import crawl_sink

    logs.setup_from_args(args)
    settings = load_settings(args.config, overrides=_fleet_overrides(args))
    if args.max_segments < 1:
        print(f"crawlfleet links: --max-segments must be >= 1, got {args.max_segments}", file=sys.stderr)
        return 2
    sink = crawl_sink(settings, Path(args.out))
    runner = RunnerConfig(runner=args.runner, work_dir=args.work_dir.resolve(), spark_master=args.spark_master,
                          conf_path=args.conf_path, spark_tmp_dir=settings.cluster.spark_tmp_dir,
                          spark_app=settings.cluster.spark_app)  # fmt: skip
    service = LinkJobsService(segments=sink.segments, store=sink.store, runner=runner,
                              publish=amqp_publisher(settings, settings.dispatch.service),
                              max_segments=args.max_segments,
                              parse_cpu_limit_s=settings.fetch.parse_cpu_limit_s,
                              parse_failed_per_host=settings.fetch.parse_failed_per_host,
                              lease_ttl_s=settings.fleet.link_lease_s,
                              retention_s=settings.fleet.segment_retention_s)  # fmt: skip
    stopping: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    # A service that waits in silence for a mistyped --out looks like one that works: say where it looks.
    if not sink.segments.startswith("/") or Path(sink.segments).is_dir():
        log.info("links: watching %s for segments (runner %s)", sink.segments, args.runner)
    else:
        log.warning("links: watching %s for segments, which is not there yet (the dispatcher's nodes create it)",
                    sink.segments)  # fmt: skip
    summary = service.run(stop=lambda: bool(stopping))
    print(json.dumps(summary, sort_keys=True))
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    from kombu import Producer
    from kombu.exceptions import OperationalError

    from pipeline.transport.wire import topology
    from pipeline.transport.wire.amqp import fleet_connection
    from pipeline.transport.wire.messages import encode, submit_message
    from pipeline.transport.wire.tls import describe

    settings = load_settings(args.config, overrides={"fleet": {"broker_url": args.broker_url}})
    service = topology.check_name(args.service, what="service")
    if settings.dispatch.quotas_file:  # S1: a service not in the quota list gets no URL; say so now
        from pipeline.dispatch.quotas import Quotas

        if Quotas.load(settings.dispatch.quotas_file).quota(service) is None:
            raise UsageError(f"service {service} is not in the quota list {settings.dispatch.quotas_file}")
    enc = encode(submit_message(service, list(args.seeds)))
    try:
        with fleet_connection(settings.fleet, confirm=True) as conn:
            producer = Producer(conn.channel())
            producer.publish(enc.body, exchange=topology.submit_exchange(), routing_key=service,
                             content_type=enc.content_type, content_encoding=enc.content_encoding, delivery_mode=2,
                             declare=[topology.submit_queue(service)], retry=True)  # fmt: skip
    except (OSError, OperationalError) as exc:  # one line naming the broker (not its password), no traceback
        raise ConnectionError(f"cannot reach the broker at {_redacted(settings.fleet.broker_url)}: "
                              f"{describe(exc, settings.fleet)}") from exc
    print(f"submitted {len(args.seeds)} URL(s) to service {service}")
    return 0
