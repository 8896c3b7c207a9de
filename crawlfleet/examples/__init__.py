"""Example plugins (docs/PLUGINS.md). ``products``: schema.org products from JSON-LD and microdata;
``breadcrumbs``: data handed from a page to the pages its links find (``Link.meta``, ``Page.meta``)."""
