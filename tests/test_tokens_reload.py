"""SIGHUP and tokens-file reloads on a real ``serve``: never a hang, never a stuck loop.

A SIGHUP handler that reloaded the file itself ran on the loop's thread, between two
bytecodes of whatever the loop was doing, and deadlocked on the registry's lock when
that was a reload too: the server stopped answering and ignored SIGTERM for good. The
handler now only asks the registry's one reload task to run (several SIGHUPs in a row
make one more reload), and the file is parsed off the loop's thread.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from bridge_store.errors import ConnectError
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.security.tokens_file import load_entries, render
from tests.support.server import CALL_STORE_PATH, ServerProcess, StoreHttpClient, start_server

#: How long a server may take to stop on SIGTERM (it drains calls, the stores close).
STOP_BOUND_SECONDS = 20.0
#: How long a call may take while reloads of a 20,000-token file run.
CALL_BOUND_SECONDS = 20.0


def write_tokens(path: Path, count: int, known: str, *, salt: str = "") -> None:
    """``count`` tokens in ``path``: ``known`` (an admin) and ``count - 1`` random ones."""
    entries = [TokenEntry("known", token_digest(known), "default", Scope.ADMIN)]
    entries += [
        TokenEntry(f"t{salt}{number}", token_digest(secrets.token_hex(8)), "team-a", Scope.READ)
        for number in range(1, count)
    ]
    # Replaced whole, as `token add` does: a reload never reads half a file (one that
    # stops after the header would revoke every token, rightly, until the next).
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(render(entries))
    temporary.chmod(0o600)
    os.replace(temporary, path)


def stops_on_sigterm(server: ServerProcess) -> float:
    """SIGTERM the server; how long it took to exit (fails past the bound)."""
    server.client.close()
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=STOP_BOUND_SECONDS)
    except Exception:
        server.process.kill()
        server.process.wait()
        pytest.fail(f"serve ignored SIGTERM for {STOP_BOUND_SECONDS} s: hung")
    return time.monotonic() - started


def answers(server: ServerProcess, token: str) -> None:
    """A call answers within the bound (raises otherwise)."""
    response = httpx.post(
        server.url + CALL_STORE_PATH,
        json={"substore": "agents", "method": "list", "input": {}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=CALL_BOUND_SECONDS,
    )
    assert response.status_code == 200, response.text


def test_two_sighups_during_a_reload_of_20000_tokens_never_hang_serve(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    known = secrets.token_hex(32)
    write_tokens(path, 20_000, known)
    server = start_server("--store", "memory://", tokens_file=path, token=known)
    try:
        for _ in range(3):
            server.process.send_signal(signal.SIGHUP)
            time.sleep(0.1)
            server.process.send_signal(signal.SIGHUP)
            time.sleep(0.3)
        answers(server, known)
    finally:
        took = stops_on_sigterm(server)
    assert server.process.returncode == 0, server.stderr_lines
    assert took < STOP_BOUND_SECONDS


def test_sighup_storm_with_edits_and_calls_in_flight_never_hangs_serve(tmp_path: Path) -> None:
    """Edit the file, make a call, SIGHUP within milliseconds: many rounds, two sizes."""
    path = tmp_path / "tokens.toml"
    known = secrets.token_hex(32)
    write_tokens(path, 300, known)
    server = start_server("--store", "memory://", tokens_file=path, token=known)
    stop = threading.Event()
    failures: list[BaseException] = []
    calls = [0]

    def call_in_a_loop() -> None:
        client = StoreHttpClient(server.url, known)
        try:
            while not stop.is_set():
                try:
                    client.call("agents", "list", {})
                    calls[0] += 1
                except ConnectError as error:  # an answer, even a refusal, is not a hang
                    failures.append(error)
        except BaseException as error:  # a timeout: the server stopped answering
            failures.append(error)
        finally:
            client.close()

    callers = [threading.Thread(target=call_in_a_loop) for _ in range(3)]
    for caller in callers:
        caller.start()
    rounds = random.Random(21)
    try:
        for number in range(60):
            count = 20_000 if number % 20 == 19 else 300
            write_tokens(path, count, known, salt=str(number))
            server.process.send_signal(signal.SIGHUP)
            time.sleep(rounds.uniform(0, 0.01))
            server.process.send_signal(signal.SIGHUP)
            time.sleep(rounds.uniform(0, 0.05))
        answers(server, known)
    finally:
        stop.set()
        for caller in callers:
            caller.join(CALL_BOUND_SECONDS + 5)
        took = stops_on_sigterm(server)
    assert not failures, failures[:3]
    assert calls[0] > 0
    assert server.process.returncode == 0, server.stderr_lines
    assert took < STOP_BOUND_SECONDS
    assert os.path.exists(path)


def test_reloads_on_a_loop_parse_off_its_thread_and_coalesce(tmp_path: Path) -> None:
    """The loop answers while a reload parses; 50 requests meanwhile make one more read."""
    path = tmp_path / "tokens.toml"
    known = secrets.token_hex(32)
    write_tokens(path, 3, known)
    parsing = threading.Event()
    release = threading.Event()
    readers: list[int] = []

    def slow_loader(source: Path) -> list[TokenEntry]:
        readers.append(threading.get_ident())
        parsing.set()
        assert release.wait(10), "the test never let the reload finish"
        return load_entries(source)

    registry = TokenRegistry(load_entries(path), path=path, loader=slow_loader)

    async def scenario() -> None:
        registry.follow_on(asyncio.get_running_loop(), None)
        registry.request_reload()
        assert await asyncio.to_thread(parsing.wait, 10)
        # The loop runs while the file is parsed: these requests only mark one more.
        for _ in range(50):
            registry.request_reload()
            await asyncio.sleep(0)
        assert registry.resolve(known.encode()) is not None
        release.set()
        task = registry._task
        assert task is not None
        await task  # the one task made both reads

    loop_thread = threading.get_ident()
    asyncio.run(scenario())
    assert len(readers) == 2
    assert loop_thread not in readers
