"""The link-jobs service (``crawlfleet links``): the nodes' segments through the mrjob link jobs into the
pending set, in rounds claimed through the crawl's store by any number of such services.

May import: ``pipeline.transport.wire``, jobs and the rooms below pipeline.transport.
"""
