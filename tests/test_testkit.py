"""testkit/services.py and the fixtures over it load without any backend library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_fixtures_import_no_backend_client_library() -> None:
    # So an install without an extra still collects the tests that do not need it.
    code = (
        "import sys; import testkit.services, tests.support.postgres, tests.support.redis, "
        "tests.support.s3; print(sorted(set(sys.modules) & {'asyncpg', 'redis', 'moto', "
        "'botocore', 'werkzeug', 'obstore'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
