"""Test tiers: tests/unit (pure), tests/contract (store contract), tests/integration (real services),
tests/e2e (testbed crawls), tests/faults (kills). Service fixtures live in tests/fixtures/<area>.py."""

pytest_plugins = [
    "tests.fixtures.testbed",
    "tests.fixtures.dns",
    "tests.fixtures.hbase",
    "tests.fixtures.rabbitmq",
    "tests.fixtures.spark",
]
