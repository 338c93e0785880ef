"""``serve --workers 2``: every worker accepts every viewer session, and a sign-out on
one worker ends the session on all of them.

Each worker used to seal cookies with a secret of its own, so about every other page
landed on a worker that sent the browser back to sign-in (viewer/session.py,
viewer/ended_sessions.py). Every request here opens a new connection, so the kernel
hands it to either worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from bridge_store.viewer.session import SESSION_COOKIE
from tests.support.server import ServerProcess, serve

#: Requests per check: each goes to either worker, so both are reached (a worker
#: that refused every one of its share would fail one of these with odds 2^-24).
REQUESTS = 24


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/store.db"
    elif request.param == "postgres":
        url = request.getfixturevalue("make_migrated_postgres_url")()
    else:
        url = request.getfixturevalue("make_redis_url")()
    with serve("--store", url, "--workers", "2") as server:
        yield server


def browser(server: ServerProcess) -> httpx.Client:
    """A client that opens a new connection for every request, as if to any worker."""
    return httpx.Client(
        base_url=server.url, limits=httpx.Limits(max_keepalive_connections=0), timeout=30
    )


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, f"the page has no CSRF field: {page.status_code} {page.text[:200]}"
    return found.group(1)


def sign_in(server: ServerProcess) -> httpx.Client:
    client = browser(server)
    form = client.get("/ui/sign-in")
    answer = client.post(
        "/ui/sign-in",
        data={"csrf": csrf_of(form), "token": server.token, "next": "/ui/"},
        headers={"Origin": server.url.rstrip("/")},
    )
    assert answer.status_code == 303, answer.text
    return client


def sign_out(client: httpx.Client, server: ServerProcess) -> None:
    page = client.get("/ui/")
    answer = client.post(
        "/ui/sign-out",
        data={"csrf": csrf_of(page)},
        headers={"Origin": server.url.rstrip("/")},
    )
    assert answer.status_code == 303


def statuses(client: httpx.Client, path: str) -> list[int]:
    return [client.get(path).status_code for _ in range(REQUESTS)]


def replay(server: ServerProcess, cookie: str) -> httpx.Client:
    client = browser(server)
    client.cookies.set(SESSION_COOKIE, cookie, path="/ui")
    return client


def test_every_worker_accepts_the_session_and_a_sign_out_ends_it_on_all(
    server: ServerProcess,
) -> None:
    with closing(sign_in(server)) as signed_in, closing(sign_in(server)) as other:
        assert statuses(signed_in, "/ui/?format=json") == [200] * REQUESTS
        assert statuses(signed_in, "/ui/runs") == [200] * REQUESTS

        copy = signed_in.cookies[SESSION_COOKIE]
        sign_out(signed_in, server)
        with closing(replay(server, copy)) as thief:
            assert statuses(thief, "/ui/?format=json") == [401] * REQUESTS
        # Only that session ended, on every worker.
        assert statuses(other, "/ui/?format=json") == [200] * REQUESTS


def test_two_sign_outs_at_once_end_both_sessions_everywhere(server: ServerProcess) -> None:
    clients = [sign_in(server) for _ in range(8)]
    try:
        copies = [client.cookies[SESSION_COOKIE] for client in clients]
        with ThreadPoolExecutor(len(clients)) as pool:
            list(pool.map(lambda client: sign_out(client, server), clients))
        for copy in copies:
            with closing(replay(server, copy)) as thief:
                assert statuses(thief, "/ui/?format=json")[:8] == [401] * 8
    finally:
        for client in clients:
            client.close()
