"""The frontier and the seen-set: what to fetch next, and what was met before.

- ``frontier``: Mercator-style per-host queues, politeness clocks and host leases (pure).
- ``leases``: who holds which hosts, per-IP lease counts; ``readyheap``: hosts in the order their clocks allow.
- ``limits``: what the frontier may do and the priority order of a refill; ``answered``: URLs already settled.
- ``hoststate``, ``hostqueue``: one host's state and its compact RAM window of URLs.
- ``activehosts``: which hosts are worked on now (Heritrix's active queues).
- ``seentable``: the exact in-RAM fingerprint set; ``dedup``: S5's LRU in front of it and the store.

May import: pipeline.urls, fetchers (records), pipeline.storage (records, look-ups).
"""
