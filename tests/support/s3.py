"""S3 fixtures: an S3-compatible server (moto) on a loopback port, fresh key prefixes.

``make_s3_url()`` is what most tests want: each call returns an ``s3://`` store URL
for the session's server, under a new unique key prefix of the session's bucket, with
the endpoint, region and (fake) credentials as URL parameters, so a ``bridge-store
serve`` subprocess can use it as it is. Every object under every prefix handed out is
deleted at teardown. Keyword arguments become extra URL parameters
(``make_s3_url(max_attempts="2")``).

``s3_server`` is the session's server; ``private_s3_server`` starts one a test may
throttle or stop (see :class:`S3Server`).

Why not moto's ``ThreadedMotoServer`` as it is: moto checks ``If-None-Match`` and
``If-Match`` and then writes, with no lock in between, while its server handles
requests on threads, so nothing makes the pair atomic. (A trial with 4 threads racing
on 300 keys caught no double success; the window is narrow, not closed.) S3 makes the
check and the write one atomic step, and the backend's correctness rests on that: this
server runs moto's application with requests serialised, so race tests never pass or
fail on moto's luck.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlencode

import botocore.session
import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

BUCKET = "bridge-store-test"
REGION = "us-east-1"
#: moto accepts any credentials; these never reach a real AWS account.
ACCESS_KEY = "testing"
SECRET_KEY = "testing"

MakeS3Url = Callable[..., str]
StartResponse = Callable[..., Any]

_THROTTLE_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One line per request would bury the test output."""


class S3Server:
    """moto's S3 on a free loopback port, one request at a time, with two faults.

    ``throttled = True`` answers every request 503 SlowDown (what S3 says when a
    prefix is over its request rate); ``stop()`` makes the port refuse connections.
    ``requests`` counts what reached the server, throttled requests included.
    """

    def __init__(self) -> None:
        self._app = DomainDispatcherApplication(create_backend_app)
        self._lock = threading.Lock()
        self.throttled = False
        self.requests = 0
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint_url = ""
        self._client: Any = None
        #: Every (bucket, prefix) :meth:`url` handed out, for clean-up.
        self.handed_out: list[tuple[str, str]] = []

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        with self._lock:
            self.requests += 1
            if self.throttled:
                start_response("503 Slow Down", [("Content-Type", "application/xml")])
                return [_THROTTLE_BODY]
            # The body is produced inside the lock: the whole request is one step.
            return list(self._app(environ, start_response))

    def start(self) -> None:
        self._server = make_server(
            "127.0.0.1", 0, self, threaded=True, request_handler=_QuietHandler
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
        # Made once: building a botocore client loads the whole S3 service model.
        if self._client is None:
            self._client = botocore.session.get_session().create_client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=REGION,
                aws_access_key_id=ACCESS_KEY,
                aws_secret_access_key=SECRET_KEY,
            )
        return self._client

    def create_bucket(self, bucket: str = BUCKET) -> None:
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)

    @property
    def running(self) -> bool:
        return self._server is not None

    def url(self, prefix: str, bucket: str = BUCKET, **params: str) -> str:
        self.handed_out.append((bucket, prefix))
        query = {
            "endpoint_url": self.endpoint_url,
            "region": REGION,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            **params,
        }
        return f"s3://{bucket}/{prefix}?{urlencode(query)}"

    def keys(self, prefix: str, bucket: str = BUCKET) -> list[str]:
        """Every key under ``prefix``, ascending."""
        client = self.client()
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def delete_prefix(self, prefix: str, bucket: str = BUCKET) -> None:
        client = self.client()
        keys = self.keys(prefix, bucket)
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The session's S3 server, with the bucket ``BUCKET`` created."""
    server = S3Server()
    server.start()
    server.create_bucket()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def private_s3_server() -> Iterator[S3Server]:
    """An S3 server of this test's own, to throttle or stop; ``BUCKET`` exists."""
    server = S3Server()
    server.start()
    server.create_bucket()
    try:
        yield server
    finally:
        server.throttled = False
        # moto's state outlives the server (one per process): a stopped server is
        # started again to delete what the test wrote.
        if not server.running:
            server.start()
        for bucket, prefix in server.handed_out:
            if bucket == BUCKET:
                server.delete_prefix(prefix, bucket)
        server.stop()


@pytest.fixture
def make_s3_url(s3_server: S3Server) -> Iterator[MakeS3Url]:
    """A factory of ``s3://`` store URLs on the session's server, each a new prefix."""
    prefixes: list[str] = []

    def make(**params: str) -> str:
        prefix = f"test-{secrets.token_hex(6)}/"
        prefixes.append(prefix)
        return s3_server.url(prefix, **params)

    yield make
    for prefix in prefixes:
        s3_server.delete_prefix(prefix)
