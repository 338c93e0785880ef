"""The viewer's session keys shared by forked workers (bridge_store.viewer.session_keys).

``serve --workers N`` forks its workers after making the keys; these tests fork the
same way: a sign-out in one process ends the session in the other, the bound's
"every session signed out" reaches every process, and sign-outs at once from several
processes are all kept.
"""

from __future__ import annotations

import os
import secrets
import time
import warnings
from collections.abc import Callable

import pytest
from starlette.requests import Request
from starlette.responses import Response

from bridge_store.viewer.session import SESSION_COOKIE, Sessions
from bridge_store.viewer.session_keys import ID_BYTES, EndedSessions, SessionKeys

TOKEN = "session-keys-test-token"
LATER = time.time() + 3600


async def _someone(token: str) -> str | None:
    return "someone" if token == TOKEN else None


def in_child(work: Callable[[], None]) -> None:
    """Run ``work`` in a forked child and wait for it; it must succeed."""
    with warnings.catch_warnings():
        # Python 3.12 warns of fork() in a process with threads (the suite's); the child
        # only touches the shared table and leaves.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        status = 1
        try:
            work()
            status = 0
        finally:
            os._exit(status)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def cookie_of(sessions: Sessions[str]) -> str:
    response = Response()
    sessions.sign_in(response, TOKEN, path="/", secure=False)
    return response.headers["set-cookie"].split(";")[0].split("=", 1)[1].strip('"')


def request_with(cookie: str) -> Request:
    return Request(
        {"type": "http", "headers": [(b"cookie", f"{SESSION_COOKIE}={cookie}".encode())]}
    )


def sign_out(sessions: Sessions[str], cookie: str) -> None:
    sessions.sign_out(request_with(cookie), Response(), path="/", secure=False)


def test_a_session_sealed_by_one_worker_opens_on_another_and_ends_on_both() -> None:
    keys = SessionKeys.new(across_forks=True)
    parent: Sessions[str] = Sessions(_someone, keys)
    cookie, other = cookie_of(parent), cookie_of(parent)

    def worker() -> None:
        sessions: Sessions[str] = Sessions(_someone, keys)
        assert sessions._open(cookie) is not None  # sealed in the other process
        sign_out(sessions, cookie)

    in_child(worker)
    assert parent._open(cookie) is None
    assert parent._open(other) is not None


def test_past_the_bound_every_session_ends_in_every_worker() -> None:
    keys = SessionKeys.new(across_forks=True, capacity=3)
    parent: Sessions[str] = Sessions(_someone, keys)
    live = cookie_of(parent)
    ended = [cookie_of(parent) for _ in range(4)]

    def worker() -> None:
        sessions: Sessions[str] = Sessions(_someone, keys)
        for cookie in ended:
            sign_out(sessions, cookie)  # the 4th is past the bound

    in_child(worker)
    assert len(keys.ended) == 0
    assert parent._open(live) is None  # everyone signed out: a new generation
    assert all(parent._open(cookie) is None for cookie in ended)
    fresh = cookie_of(parent)
    assert parent._open(fresh) is not None  # signing in again works


def test_sign_outs_at_once_from_several_workers_are_all_kept() -> None:
    ended = EndedSessions.across_forks(capacity=1000)
    ids = [[secrets.token_bytes(ID_BYTES) for _ in range(100)] for _ in range(4)]
    children = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for batch in ids:
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    for session_id in batch:
                        assert ended.end(session_id, LATER)
                    status = 0
                finally:
                    os._exit(status)
            children.append(pid)
    for pid in children:
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert len(ended) == 400
    assert all(ended.is_ended(session_id, 0) for batch in ids for session_id in batch)


def test_an_id_is_found_only_where_it_was_stored() -> None:
    ended = EndedSessions.in_process(capacity=4)
    first, second = b"\x00" * 8 + b"\x01" * 8, b"\x02" * 8 + b"\x03" * 8
    ended.end(first, LATER)
    ended.end(second, LATER)
    straddling = b"\x01" * 8 + b"\x02" * 8  # the end of one id and the start of the next
    assert not ended.is_ended(straddling, 0)
    assert ended.is_ended(first, 0)
    assert ended.is_ended(second, 0)
    assert not ended.is_ended(secrets.token_bytes(ID_BYTES), 0)
    assert ended.is_ended(secrets.token_bytes(ID_BYTES), 1)  # another generation: ended


def test_a_full_table_drops_the_expired_before_ending_everyone() -> None:
    ended = EndedSessions.in_process(capacity=3)
    expired, live = secrets.token_bytes(ID_BYTES), secrets.token_bytes(ID_BYTES)
    ended.end(expired, time.time() - 1)
    ended.end(live, LATER)
    ended.end(secrets.token_bytes(ID_BYTES), LATER)
    newest = secrets.token_bytes(ID_BYTES)
    assert ended.end(newest, LATER)  # room made by the expired one
    assert ended.generation() == 0
    assert len(ended) == 3
    assert ended.is_ended(live, 0)
    assert ended.is_ended(newest, 0)
    assert not ended.is_ended(expired, 0)  # its cookie has expired anyway


def test_the_keys_never_show_their_secret() -> None:
    keys = SessionKeys.new()
    assert keys.secret.hex() not in repr(keys)
    assert repr(keys.secret) not in repr(keys)


@pytest.mark.parametrize("bad", [b"", b"x" * (ID_BYTES - 1), b"x" * (ID_BYTES + 1)])
def test_only_whole_session_ids_are_ended(bad: bytes) -> None:
    with pytest.raises(ValueError, match="a session id is 16 bytes"):
        EndedSessions.in_process().end(bad, LATER)
