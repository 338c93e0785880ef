"""S3 fixtures: the session's S3 server (moto, see ``testkit.services.S3Server``), prefixes.

``make_s3_url()`` is what most tests want: each call returns an ``s3://`` store URL
for the session's server, under a new unique key prefix of the session's bucket, with
the endpoint, region and (fake) credentials as URL parameters, so a ``bridge-store
serve`` subprocess can use it as it is. Every object under every prefix handed out is
deleted at teardown. Keyword arguments become extra URL parameters
(``make_s3_url(max_attempts="2")``).

``s3_server`` is the session's server; ``private_s3_server`` starts one a test may
throttle or stop.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator

import pytest

from testkit.services import S3_BUCKET, S3Server

MakeS3Url = Callable[..., str]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The session's S3 server, with the bucket ``S3_BUCKET`` created."""
    server = S3Server()
    server.start()
    server.create_bucket()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def private_s3_server() -> Iterator[S3Server]:
    """An S3 server of this test's own, to throttle or stop; ``S3_BUCKET`` exists."""
    server = S3Server()
    server.start()
    server.create_bucket()
    try:
        yield server
    finally:
        server.throttled = server.denied = server.conflicting = False
        # moto's state outlives the server (one per process): a stopped server is
        # started again to delete what the test wrote.
        if not server.running:
            server.start()
        for bucket, prefix in server.handed_out:
            if bucket == S3_BUCKET:
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
