"""Benchmarks, one module each: ``crawlfleet bench NAME [--json] ...``.

A bench module defines ``add_arguments(parser)`` and ``run(args) -> dict``. The dict is the JSON
result; every figure that matters is also given as a ratio to a baseline measured in the same run.

May import: anything in pipeline, fetchers and jobs.
"""

BENCHES: dict[str, str] = {
    "local": "pipeline.harness.bench.local",  # embedded crawl vs bare aiohttp+selectolax loop (#2)
    "fetch": "pipeline.harness.bench.fetch",  # aio vs threaded vs bare loop (#3)
    "dns": "pipeline.harness.bench.dns",  # S4 reproduction and S2 memory (#4)
    "dispatch": "pipeline.harness.bench.dispatch",  # the fleet dispatcher's decisions at N nodes; S1/S3 sims (#5, #36)
    "fleet": "pipeline.harness.bench.fleet",  # fleet vs embedded (#6)
    "store": "pipeline.harness.bench.store",  # HBase vs SQLite (#7)
    "jobs": "pipeline.harness.bench.jobs",  # extraction runners and S5 dedup (#8)
    "scale": "pipeline.harness.bench.scale",  # 10k..1M pages, memory per queued URL (#11)
    "soak": "pipeline.harness.bench.soak",  # fault soak (#10)
    "amqp": "pipeline.harness.bench.amqp",  # kombu vs pika on the dispatcher's consume and publish (#18)
    "s5fleet": "pipeline.harness.bench.s5fleet",  # S5 LRU + batch size on real HBase at 10 ms (#18)
    "s1": "pipeline.harness.bench.s1",  # S1 quota flatness in a real fleet crawl, from the access log (#19)
    "freshness": "pipeline.harness.bench.freshness",  # adaptive vs uniform revisiting on the living web (#23)
    "shards": "pipeline.harness.bench.shards",  # S5 between dispatcher shards: scale, skew, block sweep (#39)
    "s3": "pipeline.harness.bench.s3",  # S3 n_i across nodes of 1x/2x/4x speed in a real fleet crawl (#19)
    "testbed": "pipeline.harness.testbed.bench",  # testbed HTTP/DNS throughput (#2)
    "peers": "pipeline.harness.bench.peers.bench",  # crawlfleet vs colly, Scrapy and the bare loop (#40)
}
