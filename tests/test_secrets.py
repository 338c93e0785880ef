"""No log line, at any level, carries a document, the token, a password or a key.

For every backend, ``bridge-store serve --log-level debug --access-log`` runs with a
bearer token, a store URL password (Postgres, Redis) or S3 secret key, and documents
holding a planted ``sdkMetadata.blobEncryptionKey``; then everything that makes a
server log is made to happen: bad input (the planted key inside it), a database error
no mapping knows (a Postgres trigger that quotes the whole row in its message, a
SQLite trigger, a Redis key of the wrong type, an S3 object that is not JSON), and an
outage and its end. Every line of the server's stdout and stderr is then scanned for
each secret (and the base64 the key travels in as a checkpoint blob). The log must
also show that the errors happened, so a server that logged nothing would fail too.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.config import READY_PREFIX
from testkit.services import S3_BUCKET, S3Server, execute, free_port, s3_store_url
from tests.support.proxy import FaultyProxy

TOKEN = "token-" + secrets.token_hex(20)
PLANTED_KEY = "planted-" + secrets.token_hex(24)
PASSWORD = "password-" + secrets.token_hex(12)
START_TIMEOUT_SECONDS = 60.0
CALL_TIMEOUT_SECONDS = 30.0
SERVE = (sys.executable, "-m", "bridge_store", "serve", "--port", "0", "--backend-timeout", "1")
REDIS_OPTIONS = ("--bind", "127.0.0.1", "--save", "", "--appendonly", "no")


@dataclass
class Target:
    """A store as the test breaks it: its URL, its secrets, and how to break it."""

    url: str
    #: Makes the next agents.create/agents.get of ``explode`` fail in a way no mapping knows.
    break_untranslated: Callable[[], None]
    #: Starts and ends an outage.
    outage: tuple[Callable[[], None], Callable[[], None]]
    secrets: list[str] = field(default_factory=list)
    #: Undoes ``break_untranslated`` where the breakage would outlast the one call.
    repair: Callable[[], object] = lambda: None
    #: The method that meets the breakage: agents.create, or agents.get where a create
    #: would only find the key taken.
    untranslated_method: str = "create"


def agent(agent_id: str) -> dict[str, Any]:
    return {
        "agentId": agent_id,
        "cwd": "/work/secret-project",
        "status": "idle",
        "activeRunId": None,
        "name": "secretive",
        "createdAt": 1,
        "updatedAt": 1,
        "sdkMetadata": {"blobEncryptionKey": PLANTED_KEY},
    }


@contextmanager
def serving(url: str, directory: Path) -> Iterator[tuple[str, Path]]:
    """``serve`` at debug level with every output line going to one file."""
    log = directory / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [*SERVE, "--store", url, "--log-level", "debug", "--access-log"],
            cwd=directory,
            env={**os.environ, "BRIDGE_STORE_AUTH_TOKEN": TOKEN},
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )
    try:
        yield _ready_url(process, log), log
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(START_TIMEOUT_SECONDS)


def _ready_url(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(READY_PREFIX):
                url: str = json.loads(line[len(READY_PREFIX) :])["url"]
                return url
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"serve did not start:\n{log.read_text(errors='replace')}")


def make_everything_fail(base_url: str, target: Target) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=CALL_TIMEOUT_SECONDS) as http:

        def call(substore: str, method: str, data: Any) -> httpx.Response:
            body = {"substore": substore, "method": method, "input": data}
            return http.post(CALL_STORE_PATH, json=body)

        # Ordinary traffic, the key in documents, payloads and a blob.
        assert call("agents", "create", {"agent": agent("a-1")}).status_code == 200
        assert call("agents", "get", {"agentId": "a-1"}).status_code == 200
        assert call("agents", "list", {}).status_code == 200
        event = {"runId": "r-1", "eventType": "e", "payload": {"key": PLANTED_KEY}}
        assert call("runEvents", "append", event).status_code == 200
        blob = base64.b64encode(PLANTED_KEY.encode()).decode()
        data = {"agentId": "a-1", "blobId": "b-1", "data": blob}
        assert call("checkpoints", "create", data).status_code == 200
        # Bad input, the key inside it.
        bad = [
            call("agents", "create", {"agent": {**agent("a-2"), "updatedAt": PLANTED_KEY}}),
            call("agents", "create", {"agent": {**agent(PLANTED_KEY + "\x00"), "cwd": "/w"}}),
            call("agents", "list", {"filter": {"cursor": PLANTED_KEY}}),
            call("runEvents", "list", {"runId": "r-1", "afterOffset": PLANTED_KEY}),
            http.post(CALL_STORE_PATH, content=b'{"input": {"k": "' + PLANTED_KEY.encode()),
            http.post(
                CALL_STORE_PATH,
                json={"substore": "agents", "method": "get", "input": {}},
                headers={"Authorization": f"Bearer {TOKEN}x"},
            ),
        ]
        assert [answer.status_code for answer in bad] == [400, 400, 400, 400, 400, 401]
        # A failure no mapping knows: answered internal, logged by its class.
        target.break_untranslated()
        if target.untranslated_method == "create":
            untranslated = call("agents", "create", {"agent": agent("explode")})
        else:
            untranslated = call("agents", "get", {"agentId": "explode"})
        assert untranslated.json() == {"code": "internal", "message": "internal error"}
        target.repair()
        # An outage, then the store back.
        begin, end = target.outage
        begin()
        assert call("agents", "create", {"agent": agent("during-outage")}).status_code == 503
        end()
        statuses = [call("agents", "get", {"agentId": "a-1"}).status_code for _ in range(10)]
        assert statuses[-1] == 200, statuses


def scan(log: Path, target: Target) -> None:
    text = log.read_text(errors="replace")
    planted = [TOKEN, PLANTED_KEY, base64.b64encode(PLANTED_KEY.encode()).decode()]
    for number, line in enumerate(text.splitlines(), 1):
        for secret in planted + target.secrets:
            assert secret not in line, f"line {number} carries a secret: {line[:300]}"
    # The errors were there to be logged, and were.
    assert f"CallStore agents.{target.untranslated_method} failed: " in text, text
    assert " is unavailable: " in text, text
    assert " answers again after " in text, text


def run_and_scan(target: Target, tmp_path: Path) -> None:
    with serving(target.url, tmp_path) as (base_url, log):
        make_everything_fail(base_url, target)
    scan(log, target)


# -- the backends ----------------------------------------------------------------------


def test_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    holder: list[sqlite3.Connection] = []

    def trigger() -> None:
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TRIGGER explode BEFORE INSERT ON agents WHEN NEW.agent_id = 'explode' "
                "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
            )

    def lock() -> None:  # a writer that holds the file past the busy timeout
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN EXCLUSIVE")
        holder.append(writer)

    def unlock() -> None:
        holder.pop().execute("ROLLBACK")

    run_and_scan(Target(f"sqlite:///{path}?busy_timeout=200", trigger, (lock, unlock)), tmp_path)


@pytest.mark.postgres
def test_postgres(tmp_path: Path, make_migrated_postgres_url: Callable[[], str]) -> None:
    admin = make_migrated_postgres_url()
    parts = urlsplit(admin)
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    # Trust authentication takes any password: the URL carries one all the same.
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{proxy.port}{parts.path}"

    def trigger() -> None:
        # A message that quotes the whole row: what an untranslated error can carry.
        execute(
            admin,
            "CREATE FUNCTION explode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.agent_id = 'explode' THEN RAISE EXCEPTION 'refused: %', NEW.doc; END IF; "
            "RETURN NEW; END $$",
            "CREATE TRIGGER explode BEFORE INSERT ON agents "
            "FOR EACH ROW EXECUTE FUNCTION explode()",
        )

    try:
        run_and_scan(
            Target(url, trigger, (proxy.blackhole, proxy.heal), secrets=[PASSWORD]), tmp_path
        )
    finally:
        proxy.close()


@contextmanager
def redis_with_a_password(directory: Path) -> Iterator[int]:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.fail("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [
            executable,
            "--port",
            str(port),
            "--requirepass",
            PASSWORD,
            "--dir",
            str(directory),
            *list(REDIS_OPTIONS),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(port=port, password=PASSWORD)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        yield port
    finally:
        process.terminate()
        process.wait(START_TIMEOUT_SECONDS)


#: The agents' documents under the prefix the test's store URL names.
DOCS_KEY = "{secrets:agents}:docs"


@pytest.mark.redis
def test_redis(tmp_path: Path) -> None:
    import redis

    with redis_with_a_password(tmp_path) as port:
        proxy = FaultyProxy("127.0.0.1", port)
        url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.port}/0?prefix=secrets"

        client = redis.Redis(port=port, password=PASSWORD)

        def wrong_type() -> None:
            # The agents' documents hash replaced by a string: WRONGTYPE, no mapping.
            client.set(DOCS_KEY, PLANTED_KEY)

        try:
            target = Target(url, wrong_type, (proxy.blackhole, proxy.heal), secrets=[PASSWORD])
            target.repair = functools.partial(client.delete, DOCS_KEY)
            run_and_scan(target, tmp_path)
        finally:
            client.close()
            proxy.close()


@pytest.mark.s3
def test_s3(tmp_path: Path, s3_server: S3Server) -> None:
    endpoint = urlsplit(s3_server.endpoint_url)
    proxy = FaultyProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 0)
    prefix = f"secrets-{secrets.token_hex(4)}/"
    s3_server.handed_out.append((S3_BUCKET, prefix))
    secret_key = "s3-secret-" + secrets.token_hex(12)
    # The access key id is not secret on its own, but half of a credential: never logged.
    access_key = "AKIA" + secrets.token_hex(8).upper()
    url = s3_store_url(
        f"http://127.0.0.1:{proxy.port}",
        prefix,
        secret_access_key=secret_key,
        access_key_id=access_key,
    )

    def not_json() -> None:
        # An agent document that is not JSON (and holds the key): the decode fails.
        client = s3_server.client()
        client.put_object(
            Bucket=S3_BUCKET,
            Key=f"{prefix}agents/doc/{b'explode'.hex()}",
            Body=b"not json: " + PLANTED_KEY.encode(),
        )

    try:
        run_and_scan(
            Target(
                url,
                not_json,
                (proxy.blackhole, proxy.heal),
                secrets=[secret_key, access_key],
                untranslated_method="get",
            ),
            tmp_path,
        )
    finally:
        proxy.close()
        s3_server.delete_prefix(prefix)
