"""Crawl state and pages at rest: the store interface, its back-ends, the journal, WARC.

- ``base``: the ``Store`` interface and its records (UrlRecord, PageRecord, Outcome).
- ``sqlite`` (embedded default), ``hbase`` (the fleet, happybase over Thrift), ``writebehind``.
- ``journal``: append-only segments of fetch results; ``warc``: WARC 1.1 output; ``rowkey``.

May import: pipeline.settings, pipeline.urls, fetchers (records).
"""
