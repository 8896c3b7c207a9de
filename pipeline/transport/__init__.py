"""The fleet: fetch nodes, the dispatcher and the link-jobs service, joined over RabbitMQ; one room per role.

- ``wire``: the AMQP wire and its security: queues and exchanges, the JSON messages (batches, replies,
  heartbeats, links reports), signing, TLS, the broker sessions, S1's serial check.
- ``node``: a fetch node (``crawlfleet worker``): the Celery task, its long-lived fetch loop, the sink that
  stores a batch's pages and segments, the chunks it reports, its lease fence.
- ``links``: the link-jobs service (``crawlfleet links``): rounds of the mrjob jobs over the nodes' segments,
  claimed through the store, the crawl rules they read, the reports they publish.
- ``dispatcher``: the dispatcher service (``crawlfleet dispatcher``): CrawlCore behind the broker, the nodes
  it hears, S1's grants, its view of the link jobs.
- ``cli``: the fleet's commands.

Lower rooms never import higher ones: wire < node, links < dispatcher < cli (tests/unit/test_layout.py).
May import: pipeline.crawl and everything below it; never pipeline.embedded or the harness.
"""
