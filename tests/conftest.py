"""Test tiers: tests/unit (pure), tests/contract (store contract), tests/integration (real services),
tests/e2e (testbed crawls), tests/faults (kills). Service fixtures live in tests/fixtures/<area>.py."""

pytest_plugins = [
    "tests.fixtures.testbed",
    "tests.fixtures.dns",
    "tests.fixtures.hbase",
    "tests.fixtures.rabbitmq",
    "tests.fixtures.spark",
    "tests.fixtures.cluster",
    "tests.fixtures.machines",
]

from hypothesis import HealthCheck, settings  # noqa: E402 - after the plugin list, which pytest reads first

# Property tests run on a loaded 2-core machine (CI, and engineers' suites side by side): a wall-time
# deadline or a "too slow" health check there fails on load, not on a property. Examples stay as many.
settings.register_profile("loaded-2-core", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded-2-core")
