"""Signing out of the viewer ends the session on the server: a copied cookie is refused.

Sign-out used to delete the cookie in the browser only, so a saved or stolen copy
stayed valid for up to 12 hours. Now the cookie seals a session id and sign-out
records it as ended (viewer/session.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing

import httpx
import pytest

from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.session import SESSION_COOKIE, Sessions
from bridge_store.viewer.session_keys import SessionKeys
from testkit.inprocess import running

TOKEN = "viewer-sign-out-token-0123"


@pytest.fixture
def server() -> Iterator[str]:
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    with running(app) as url:
        yield url


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, "the page has no CSRF field"
    return found.group(1)


def signed_in(server: str) -> httpx.Client:
    client = httpx.Client(base_url=server)
    form = client.get("/ui/sign-in")
    answer = client.post(
        "/ui/sign-in",
        data={"csrf": csrf_of(form), "token": TOKEN, "next": "/ui/"},
        headers={"Origin": server.rstrip("/")},
    )
    assert answer.status_code == 303
    return client


def sign_out(client: httpx.Client) -> None:
    page = client.get("/ui/")
    answer = client.post(
        "/ui/sign-out",
        data={"csrf": csrf_of(page)},
        headers={"Origin": str(client.base_url).rstrip("/")},
    )
    assert answer.status_code == 303


def test_a_copied_session_cookie_is_refused_after_sign_out(server: str) -> None:
    with closing(signed_in(server)) as browser, closing(signed_in(server)) as other_browser:
        copy = browser.cookies[SESSION_COOKIE]
        sign_out(browser)
        with httpx.Client(base_url=server) as replay:
            replay.cookies.set(SESSION_COOKIE, copy, path="/ui")
            refused = replay.get("/ui/")
            assert (refused.status_code, refused.headers["location"]) == (
                303,
                "/ui/sign-in?next=%2Fui%2F",
            )
            assert replay.get("/ui/?format=json").status_code in (303, 401)
        # Only that session ended: another sign-in of the same token goes on.
        assert other_browser.get("/ui/").status_code == 200
        # Signing in again makes a new session that works.
        with closing(signed_in(server)) as again:
            assert again.get("/ui/").status_code == 200


async def _nobody(token: str) -> str | None:
    return "someone" if token == TOKEN else None


def test_past_the_bound_of_ended_sessions_every_session_ends() -> None:
    """Memory stays bounded, and no ended session is ever forgotten into validity."""
    from starlette.requests import Request
    from starlette.responses import Response

    sessions: Sessions[str] = Sessions(_nobody, SessionKeys.new(capacity=3))

    def cookie() -> str:
        response = Response()
        sessions.sign_in(response, TOKEN, path="/", secure=False)
        value = response.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        return value.strip('"')

    def request_with(value: str) -> Request:
        header = f"{SESSION_COOKIE}={value}".encode()
        return Request({"type": "http", "headers": [(b"cookie", header)]})

    live = cookie()
    ended = [cookie() for _ in range(3)]
    for value in ended:
        sessions.sign_out(request_with(value), Response(), path="/", secure=False)
    assert sessions._open(live) is not None
    assert all(sessions._open(value) is None for value in ended)
    sessions.sign_out(request_with(cookie()), Response(), path="/", secure=False)  # the 4th
    assert sessions._open(live) is None  # everyone signed out: a new secret
    assert all(sessions._open(value) is None for value in ended)
    assert len(sessions.keys.ended) == 0
