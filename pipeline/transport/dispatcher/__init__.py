"""The dispatcher service (``crawlfleet dispatcher``): the crawl core behind the broker, S1's admission and
node choice, S3's batch sizes, the nodes it hears and the link jobs' progress.

May import: ``pipeline.transport.wire``, ``pipeline.transport.links`` (the crawl's rules it publishes) and
the rooms below pipeline.transport.
"""
