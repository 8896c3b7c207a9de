"""The crawl state machine both scales share, and what a long crawl process needs.

- ``core``: ``CrawlCore``, transport-free: frontier, dispatcher, seen-set, journal and store joined;
  ``results``: its result path (journal, outcome, flush, replay on resume); ``inflight``: its batches in
  flight; ``inputs``: seeds, submits, link-job reports, restored pending URLs.
- ``flags``: the crawl flags of ``crawl``, ``demo`` and ``dispatcher``, turned into Settings.
- ``gcpolicy``: garbage-collector settings for a process that holds a crawl.

May import: everything below it: settings, urls, fetchers, storage, dispatch, observe, links, frontier.
"""
