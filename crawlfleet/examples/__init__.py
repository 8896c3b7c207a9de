"""Example plugins (docs/PLUGINS.md). ``products``: schema.org products from JSON-LD and microdata."""
