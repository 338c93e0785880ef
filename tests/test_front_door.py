"""The server's address leads somewhere: ``GET /`` and the viewer's URL in the ready line."""

from __future__ import annotations

import httpx
import pytest

from bridge_store.ops.readiness import READY_PATH
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import HEALTH_PATH, METRICS_PATH, BridgeStoreApp, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running
from tests.support.server import serve

TOKEN = "front-door-test-token"


def app(*, ui: bool = True, metrics: bool = True, metrics_public: bool = False) -> BridgeStoreApp:
    config = ServerConfig(
        routes=Routes.single("memory://"),
        auth_token=TOKEN,
        ui=ui,
        metrics=metrics,
        metrics_public=metrics_public,
    )
    return create_app(config)


def test_the_root_sends_a_browser_to_the_viewer() -> None:
    with running(app()) as base_url:
        response = httpx.get(base_url + "/")
        assert response.status_code == 307
        assert response.headers["location"] == "/ui/"
        # Followed, it lands on the viewer's sign-in page, not a bare "Not Found".
        landed = httpx.get(base_url + "/", follow_redirects=True)
        assert landed.status_code == 200
        assert 'name="token"' in landed.text


@pytest.mark.parametrize(
    ("settings", "metrics_line"),
    [
        ({}, f"GET {METRICS_PATH}</code>: Prometheus metrics (bearer token)"),
        ({"metrics_public": True}, f"GET {METRICS_PATH}</code>: Prometheus metrics (no token)"),
        ({"metrics": False}, None),
    ],
)
def test_without_the_viewer_the_root_names_the_paths_served(
    settings: dict[str, bool], metrics_line: str | None
) -> None:
    with running(app(ui=False, **settings)) as base_url:
        response = httpx.get(base_url + "/")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert response.headers["x-content-type-options"] == "nosniff"
        page = response.text
        for path in (CALL_STORE_PATH, HEALTH_PATH, READY_PATH):
            assert f"{path}</code>" in page
        if metrics_line is None:
            assert METRICS_PATH not in page
        else:
            assert metrics_line in page
        assert "serve --no-ui" in page
        assert TOKEN not in page
        # The paths it names answer.
        assert httpx.get(base_url + HEALTH_PATH).status_code == 200
        assert httpx.get(base_url + "/ui/").status_code == 404


@pytest.mark.parametrize(("args", "viewer"), [((), True), (("--no-ui",), False)])
def test_the_ready_line_carries_the_viewers_url(args: tuple[str, ...], viewer: bool) -> None:
    with serve("--store", "memory://", *args) as server:
        ready = server.ready
        assert ready["url"].endswith("/")
        if viewer:
            assert ready["viewerUrl"] == ready["url"] + "ui/"
            sign_in = httpx.get(ready["viewerUrl"], follow_redirects=True)
            assert 'name="token"' in sign_in.text
        else:
            assert "viewerUrl" not in ready
