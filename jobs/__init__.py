"""The MapReduce jobs (mrjob), one per file, and what runs them.

``logic`` holds the job logic as plain functions shared with the embedded crawl; ``mr_*`` are the
jobs; ``runner`` and ``cli`` take segments through them into the crawl db.

May import: pipeline.links, pipeline.frontier, pipeline.storage, pipeline.observe and below.
"""
