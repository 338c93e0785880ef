from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.support.docker",
    "tests.support.fake_bridge",
    "tests.support.postgres",
    "tests.support.redis",
    "tests.support.real_bridge",
    "tests.support.redis_cluster",
    "tests.support.s3",
]

# tests/test_fuzz.py: fixed examples in CI; ``--hypothesis-profile=fuzz-long`` (registered
# here, before pytest reads the option) draws new ones.
settings.register_profile(
    "fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("fuzz-long", parent=settings.get_profile("fuzz"), derandomize=False)
