pytest_plugins = [
    "tests.support.postgres",
    "tests.support.redis",
    "tests.support.s3",
]
