"""Post-crawl report: ``crawlfleet report CRAWL_DIR --out DIR`` writes PNG plots, index.html, report.json.

Modules: ``data`` (streaming readers), ``aggregate`` (pure folding), ``plots`` (matplotlib Agg),
``html`` (the page), ``build`` (wiring), ``cli`` (the sub-command).

May import: pipeline.observe, pipeline.urls, fetchers (records).
"""

from pipeline.report.build import ReportResult, build_report

__all__ = ["ReportResult", "build_report"]
