"""Extraction plugins: what a crawl engineer adds to a crawl to get data out of it (docs/PLUGINS.md).

- ``api``: what a plugin sees and yields (``Page``, ``Item``, ``Link``) and the three kinds of plugin
  (``Extractor``, ``UrlFilter``, ``ItemPipeline``), as protocols.
- ``loading``: plugins from ``package.module:Name`` specs and the ``crawlfleet.plugins`` entry-point group;
  every mistake is one ``PluginError`` line at start-up.
- ``chain``: ``PluginSet``, the loaded plugins run over one page (extractors matched by URL pattern and
  content type, then the item pipelines, then the items' JSON), and the URL filters over links.
- ``records``: an item's JSON line: the item, its source URL, fetch time and content digest.
- ``prepare``: ``pipeline.links.prepare``'s pass with plugins: one parse tree for links and extractors. The
  embedded crawl's parse and fetch processes, its crawl core and the fleet's extract job all call it.
- ``shipping``: the plugins' code packed for the fleet's mrjob tasks (``--py-files``).

A crawl without plugins never reaches this room: its pages take ``pipeline.links.prepare`` as before.

May import: pipeline.settings, pipeline.urls, fetchers (records), pipeline.storage, pipeline.links.
"""
