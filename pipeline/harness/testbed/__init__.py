"""The testbed: a synthetic web on loopback with its own DNS, access log and ground truth.

Every crawl in tests and benchmarks fetches from here and is judged from its access log.

May import: nothing of the crawl (it must not share a bug with what it judges).
"""
