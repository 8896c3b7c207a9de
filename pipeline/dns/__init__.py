"""The DNS layer: c-ares resolution behind S2's positive/negative caches and S4's refresh rule.

Build one per process with ``CachingResolver.from_settings(settings.dns)`` and hand it to aiohttp
through ``AiohttpResolver``. Module map: keys/tld (S2 key), positive/negative (S2 caches), policy
(S1 clamping, S4 refresh), resolver/blocking (network edge), cache_resolver (the composition),
aiohttp_resolver (adapter), stats, unbound (the fleet tier, S1's layered DNS).

May import: pipeline.settings, pipeline.urls.
"""

from pipeline.dns.cache_resolver import CachingResolver
from pipeline.dns.errors import KINDS, Answer, DnsError
from pipeline.dns.stats import DnsStats

__all__ = ["KINDS", "Answer", "CachingResolver", "DnsError", "DnsStats"]
