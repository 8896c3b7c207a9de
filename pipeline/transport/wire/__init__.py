"""The AMQP wire and its security: what crosses the broker between the fleet's processes, and how.

May import: the rooms below pipeline.transport; nothing else of the fleet.
"""
