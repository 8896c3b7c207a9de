"""Seeing a crawl: live statistics, progress, logs, the dispatcher's /metrics and /status.

- ``stats``: counters every result passes through (kept cheap: the hot path calls it).
- ``progress``: the tqdm bar or periodic log line; ``logs``: key=value or JSON event lines.
- ``metrics`` and ``status_page``: Prometheus and HTML views of the stats, served by the dispatcher
  (``collector``: the Prometheus collector; ``fleetview``: per-node and per-fetcher rows).
- ``machine``: what machine a figure was measured on.
- ``errors``: a user's mistake as one line and an exit code (2 usage, 1 failure), tracebacks only when asked.

May import: pipeline.urls, fetchers (records).
"""
