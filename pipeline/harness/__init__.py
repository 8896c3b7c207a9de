"""The harness, apart from the crawl: the test web, the fault trials and the benchmarks.

Nothing in the crawl imports from here; the harness imports the crawl. Its rooms, lowest first:
``testbed`` (the synthetic web, its DNS, access log and ground truth), ``faults`` (kill/stop trials
and their accounting), then ``bench`` and ``demo``.

May import: anything in pipeline, fetchers and jobs.
"""
