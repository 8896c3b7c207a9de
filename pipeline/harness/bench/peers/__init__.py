"""``crawlfleet bench peers`` (bench.py): crawlfleet against other crawlers on the testbed, judged from its
access log. ``judge.py`` holds the pure figures, ``runners.py`` how each crawler starts, ``tools.py`` how
their tools are built or installed, ``bare.py`` the bare loop's process; ``colly/`` and ``scrapy_spider.py``
are the other crawlers' programs (they import nothing of crawlfleet)."""
