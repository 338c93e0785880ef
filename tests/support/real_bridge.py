"""Fixtures of the tests that run the real bridge: which bridge, and its Cursor API.

A pytest plugin (``tests/conftest.py``). A module whose tests run the real bridge
marks them ``pytest.mark.usefixtures("the_installed_bridge")``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.cursor_api import CursorApiStub
from tests.support.sdk_versions import BRIDGE_OVERRIDES


@pytest.fixture
def the_installed_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge under test is the installed cursor-sdk's, whatever the environment says."""
    for name in BRIDGE_OVERRIDES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cursor_api() -> Iterator[CursorApiStub]:
    """The stand-in Cursor API the offline bridge talks to."""
    with CursorApiStub() as stub:
        yield stub
