"""Fault trials: kill or stop one process of a running crawl, then account for every URL.

``accounting`` judges a trial from the testbed's access log and the store: lost, duplicated, or a
repeat of a request in flight on the killed process. ``embedded``, ``fleet``, ``services`` and
``jobs_trial`` run the trials; ``procs``, ``bed`` and ``snapshot`` are their plumbing.

May import: pipeline.harness.testbed and everything in the crawl below it.
"""
