"""What a crawl gives out, read from its store and directory: WARC, pages, items.

- ``pages``: the stored pages as plain records (URL, final URL, status, headers, text, links), from the
  SQLite or HBase store; ``iter_pages`` is the Python iterator, ``crawlfleet export pages`` the command.
- ``items``: the plugins' items of a crawl directory or a fleet's item root (``iter_items``).
- ``cli``: ``crawlfleet export warc|pages|items``.

May import: pipeline.settings, pipeline.urls, fetchers (records), pipeline.storage, pipeline.links,
pipeline.plugins.
"""
