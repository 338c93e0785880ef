pytest_plugins = ["tests.support.postgres"]
