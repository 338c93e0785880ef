"""Throwaway services for the benchmarks and the tests: the one place that makes them.

- :func:`postgres_database`: a new empty database on the machine's Postgres
  (``BRIDGE_STORE_TEST_POSTGRES``, an admin URL), dropped afterwards.
  :func:`create_database` (empty, or a copy of a template database) and
  :func:`drop_database` for callers that keep it longer.
- :func:`redis_prefix`: a store URL under a new key prefix of the machine's Redis
  (``BRIDGE_STORE_TEST_REDIS_URL``), every key of it deleted afterwards.
- :class:`S3Server`: moto's S3 on a free loopback port, with requests serialised
  (see the class) and two faults a test can switch on.
- :func:`free_port`.

Backend client libraries (asyncpg, redis, moto, botocore) are imported when used, so
importing this module needs none of the extras.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    import redis
    from werkzeug.serving import BaseWSGIServer

T = TypeVar("T")

POSTGRES_ADMIN_URL = os.environ.get(
    "BRIDGE_STORE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("BRIDGE_STORE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def free_port() -> int:
    """A loopback port nothing listens on (at the time of the call)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- Postgres ----------------------------------------------------------------------------


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion on its own loop in a worker thread.

    So the helpers work from sync code, from async code and from fixtures of either kind.
    """

    async def main() -> T:
        return await factory()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


def database_url(name: str) -> str:
    """The URL of database ``name`` on the Postgres server."""
    return urlunsplit(urlsplit(POSTGRES_ADMIN_URL)._replace(path=f"/{name}"))


def execute(url: str, *statements: str) -> None:
    """Run SQL statements, each on its own, in autocommit."""
    import asyncpg  # type: ignore[import-untyped]

    async def work() -> None:
        connection = await asyncpg.connect(url)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    run_async(work)


def fetch(url: str, query: str, *args: Any) -> list[Any]:
    """The rows (asyncpg records) of one query."""
    import asyncpg

    async def work() -> list[Any]:
        connection = await asyncpg.connect(url)
        try:
            return list(await connection.fetch(query, *args))
        finally:
            await connection.close()

    return run_async(work)


def create_database(kind: str = "test", template: str | None = None) -> str:
    """Create a database with a unique name; returns its name.

    Empty, or a copy of database ``template`` (which nobody may be connected to): a copy
    of a migrated database takes a tenth of the time the migrations take. The default
    WAL_LOG strategy copies it block by block; FILE_COPY would force a checkpoint of the
    whole shared server each time.
    """
    name = f"bridge_store_{kind}_{os.getpid()}_{secrets.token_hex(6)}"
    copied = f' TEMPLATE "{template}"' if template else ""
    execute(POSTGRES_ADMIN_URL, f'CREATE DATABASE "{name}"{copied}')
    return name


def drop_database(name: str) -> None:
    drop_databases([name])


def drop_databases(names: Iterable[str]) -> None:
    """Drop the databases, over one connection (each DROP still checkpoints the server)."""
    # FORCE: a run that failed may have left a server process connected.
    statements = [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' for name in names]
    if statements:
        execute(POSTGRES_ADMIN_URL, *statements)


@contextlib.contextmanager
def postgres_database(kind: str = "bench") -> Iterator[str]:
    """A new empty database on the Postgres server; its URL. Dropped afterwards."""
    name = create_database(kind)
    try:
        yield database_url(name)
    finally:
        drop_database(name)


# -- Redis -------------------------------------------------------------------------------


def new_redis_prefix(kind: str = "test") -> str:
    return f"bridge-store-{kind}-{secrets.token_hex(6)}"


def redis_store_url(prefix: str, **params: str) -> str:
    """The store URL of ``prefix`` on the Redis server; ``params`` are more parameters."""
    separator = "&" if "?" in REDIS_URL else "?"
    return f"{REDIS_URL}{separator}{urlencode({'prefix': prefix, **params})}"


def delete_prefix(client: redis.Redis, prefix: str) -> int:
    """Delete every key of ``prefix``; returns how many there were."""
    from bridge_store_redis.keys import KeySpace

    deleted = 0
    for pattern in KeySpace(prefix).patterns():
        for key in client.scan_iter(match=pattern, count=1000):
            deleted += int(client.unlink(key))
    return deleted


@contextlib.contextmanager
def redis_prefix(kind: str = "bench") -> Iterator[str]:
    """A store URL under a new key prefix of the Redis server; the keys deleted after."""
    import redis

    prefix = new_redis_prefix(kind)
    try:
        yield redis_store_url(prefix)
    finally:
        with redis.Redis.from_url(REDIS_URL) as client:
            delete_prefix(client, prefix)


# -- S3 ----------------------------------------------------------------------------------

S3_BUCKET = "bridge-store-test"
S3_REGION = "us-east-1"
#: moto accepts any credentials; these never reach a real AWS account.
S3_ACCESS_KEY = "testing"
S3_SECRET_KEY = "testing"

StartResponse = Callable[..., Any]


def s3_store_url(endpoint_url: str, prefix: str, bucket: str = S3_BUCKET, **params: str) -> str:
    """An ``s3://`` store URL for ``prefix`` on a server of this module: endpoint, region
    and credentials included, so a ``bridge-store serve`` process can use it as it is."""
    query = {
        "endpoint_url": endpoint_url,
        "region": S3_REGION,
        "access_key_id": S3_ACCESS_KEY,
        "secret_access_key": S3_SECRET_KEY,
        **params,
    }
    return f"s3://{bucket}/{prefix}?{urlencode(query)}"


_THROTTLE_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
#: The longest a held request waits for its release.
HOLD_TIMEOUT_SECONDS = 60.0
_DENIED_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)
_PRECONDITION_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
    b"<Message>At least one of the pre-conditions you specified did not hold</Message>"
    b"</Error>"
)


class S3Server:
    """moto's S3 on a free loopback port, one request at a time, with five faults.

    Why not moto's ``ThreadedMotoServer`` as it is: moto checks ``If-None-Match`` and
    ``If-Match`` and then writes, with no lock in between, while its server handles
    requests on threads, so nothing makes the pair atomic. (A trial with 4 threads
    racing on 300 keys caught no double success; the window is narrow, not closed.)
    S3 makes the check and the write one atomic step, and the backend's correctness
    rests on that: this server runs moto's application with requests serialised, so
    race tests never pass or fail on moto's luck, and benchmarks measure a server that
    keeps S3's promise.

    ``throttled = True`` answers every request 503 SlowDown (what S3 says when a
    prefix is over its request rate); ``denied = True`` answers 403 AccessDenied (a
    policy or credentials that no longer allow the bucket); ``conflicting = True``
    answers every conditional PUT 412 without writing (other writers always winning);
    ``hold`` makes the requests it picks wait until ``released`` is set (a request
    stuck on its way, ``held`` says one arrived); ``stop()`` makes the port refuse
    connections. ``requests`` counts what reached the
    server, refused requests included.
    """

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self._app = DomainDispatcherApplication(create_backend_app)
        self._lock = threading.Lock()
        self.throttled = False
        self.denied = False
        self.conflicting = False
        #: Requests this picks (by their WSGI environ) wait for ``released``.
        self.hold: Callable[[dict[str, Any]], bool] | None = None
        self.held = threading.Event()
        self.released = threading.Event()
        self.requests = 0
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint_url = ""
        self._client: Any = None
        #: Every (bucket, prefix) :meth:`url` handed out, for clean-up.
        self.handed_out: list[tuple[str, str]] = []

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        hold = self.hold
        if hold is not None and hold(environ):
            # Outside the lock: other requests go on while this one waits.
            self.held.set()
            self.released.wait(HOLD_TIMEOUT_SECONDS)
        with self._lock:
            self.requests += 1
            if self.throttled:
                start_response("503 Slow Down", [("Content-Type", "application/xml")])
                return [_THROTTLE_BODY]
            if self.denied:
                start_response("403 Forbidden", [("Content-Type", "application/xml")])
                return [_DENIED_BODY]
            conditional = "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
            if self.conflicting and environ["REQUEST_METHOD"] == "PUT" and conditional:
                # The body is read as a server would before it answers.
                environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
                start_response("412 Precondition Failed", [("Content-Type", "application/xml")])
                return [_PRECONDITION_BODY]
            # The body is produced inside the lock: the whole request is one step.
            return list(self._app(environ, start_response))

    def start(self) -> None:
        from werkzeug.serving import WSGIRequestHandler, make_server

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                """One line per request would bury the output."""

        self._server = make_server(
            "127.0.0.1", 0, self, threaded=True, request_handler=QuietHandler
        )
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def client(self) -> Any:
        """A plain (sync) botocore S3 client for setup, inspection and clean-up."""
        import botocore.session

        # Made once: building a botocore client loads the whole S3 service model.
        if self._client is None:
            self._client = botocore.session.get_session().create_client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=S3_REGION,
                aws_access_key_id=S3_ACCESS_KEY,
                aws_secret_access_key=S3_SECRET_KEY,
            )
        return self._client

    def create_bucket(self, bucket: str = S3_BUCKET) -> None:
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)

    @property
    def running(self) -> bool:
        return self._server is not None

    def url(self, prefix: str, bucket: str = S3_BUCKET, **params: str) -> str:
        """A store URL for ``prefix`` on this server (see :func:`s3_store_url`)."""
        self.handed_out.append((bucket, prefix))
        return s3_store_url(self.endpoint_url, prefix, bucket, **params)

    def keys(self, prefix: str, bucket: str = S3_BUCKET) -> list[str]:
        """Every key under ``prefix``, ascending."""
        client = self.client()
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def delete_prefix(self, prefix: str, bucket: str = S3_BUCKET) -> None:
        client = self.client()
        keys = self.keys(prefix, bucket)
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
