"""The price table on a real ``serve``: read at start, read again on SIGHUP, in every
worker of ``serve --workers 2``, from the flag, the environment or ``--config``.

Each page says which version of the table priced it (its content's digest); after the
file changes and the server gets SIGHUP, every page, whichever worker answers it, is
priced with the new one. A file with a mistake keeps the last good table and the page
says why. A SIGHUP that comes while the server starts is not lost.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from bridge_store.pricing.loader import load_prices
from tests.support.server import ServerProcess, serve

FIRST = '[models."composer-2"]\ninput = 1\noutput = 2\n'
SECOND = '[models."composer-2"]\ninput = 3\noutput = 4\n[budgets]\ndefault = 10\n'
#: How long every worker may take to read the file again after SIGHUP.
RELOAD_BOUND_SECONDS = 20.0


def digest(path: Path) -> str:
    version = load_prices(path).version
    assert version is not None
    return version.digest


def page_prices(server: ServerProcess) -> dict[str, object]:
    # A new connection each time: under --workers, any worker may take it.
    response = httpx.get(
        server.url + "ui/overview?format=json",
        headers={"Authorization": f"Bearer {server.token}", "Connection": "close"},
        timeout=20,
    )
    assert response.status_code == 200, response.text
    prices = response.json()["prices"]
    assert isinstance(prices, dict)
    return prices


def every_page_has(server: ServerProcess, wanted: str, *, pages: int = 16) -> None:
    """Within the bound, ``pages`` pages in a row are priced with version ``wanted``."""
    deadline = time.monotonic() + RELOAD_BOUND_SECONDS
    streak = 0
    while streak < pages:
        assert time.monotonic() < deadline, f"not every page is priced with {wanted} yet"
        version = page_prices(server)["version"]
        assert isinstance(version, dict)
        streak = streak + 1 if version["digest"] == wanted else 0
        if not streak:
            time.sleep(0.1)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sighup_reads_the_table_again_in_every_worker(tmp_path: Path, workers: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(FIRST)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with serve("--store", store, "--workers", workers, "--prices", str(path)) as server:
        every_page_has(server, digest(path))
        path.write_text(SECOND)
        server.process.send_signal(signal.SIGHUP)
        every_page_has(server, digest(path))
        # A mistake: every worker keeps the last good table, and the page says why.
        good = digest(path)
        path.write_text(SECOND + "[models.bad]\ninput = -1\noutput = 1\n")
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + RELOAD_BOUND_SECONDS
        problems = 0
        while problems < 8:
            assert time.monotonic() < deadline, "the mistake is not on every page"
            prices = page_prices(server)
            assert prices["version"] == {**prices["version"], "digest": good}  # type: ignore[dict-item]
            problems = problems + 1 if prices["problem"] else 0
            time.sleep(0.05)
        assert "models.bad.input must be a number from 0" in str(prices["problem"])
        assert server.process.poll() is None


def test_the_table_from_the_environment_and_from_config(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(FIRST)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with serve("--store", store, env={"BRIDGE_STORE_PRICES": str(path)}) as server:
        every_page_has(server, digest(path), pages=1)
    config = tmp_path / "serve.toml"
    config.write_text(f'prices = "{path}"\n')
    with serve("--store", store, "--config", str(config)) as server:
        every_page_has(server, digest(path), pages=1)
