"""The fetch node's room: downloading a batch, politely, through the DNS tier.

- ``records``: FetchResult, Batch and the other messages of the loop (their JSON schema); ``schema``: the
  strict field reading they share (``SchemaError``); ``bodycodec``: a body's zlib or LZ4 form in a message.
- ``h1`` (event-driven, a lean HTTP/1.1 client over llhttp: ``h1conn``), ``aio`` (event-driven, aiohttp)
  and ``threaded`` (requests-futures) behind ``protocol``; ``choice`` picks one by name (``--fetcher``).
- ``engine``, ``batchctx``, ``exchange``, ``body``, ``guard``: one request's life, body limits, the SSRF guard.
- ``wire``: an exchange as sent and received, handed to an archive (the WARC writer) when one is given.
- ``politeness`` and ``robots``: per-host and per-IP limits, back-off, robots.txt (protego).

May import: pipeline.settings, pipeline.urls, pipeline.dns.
"""
