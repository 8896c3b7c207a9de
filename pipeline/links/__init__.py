"""Link processing, one pass: a fetched page's bytes in, the URLs worth crawling out.

- ``extract``: HTML bytes to hrefs (lexbor), meta robots and ``<base>``.
- ``hrefs``: href text to canonical URL and fingerprint; every fast path and the memo live here.
- ``filtering``: which links become crawl candidates (nofollow, scope, depth, traps, self-links).
- ``prepare``: the pass in order (its docstring draws it): the per-result work that needs no crawl
  state (journal line, found links, candidates), done by the crawl core, a parse process or a fetch
  process alike.
The mrjob link job calls the same functions, so both scales extract and filter the same way.

May import: pipeline.settings, pipeline.urls, fetchers (records), pipeline.storage (records, journal).
"""
