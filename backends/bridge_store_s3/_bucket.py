"""The few S3 operations the backend needs, over obstore, with errors mapped.

obstore (Rust's ``object_store`` crate) signs, sends and parses in native code: on the
backend's small requests it spends 3 to 9 times less client CPU than aiobotocore
(about 0.6-1 ms against 3 ms a request, measured at 5a5e110: docs/s3.md), and a store
server is mostly small requests.

Everything above this module speaks in keys, bytes, ETags and one exception,
:class:`~.errors.PreconditionFailed`; every other failure leaves as ``unavailable``
(see :mod:`.errors`).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

import obstore
from obstore.exceptions import BaseError
from obstore.store import S3Store

from bridge_store.errors import BackendUnreachable, ConfigurationError, unavailable

from ._credentials import ProfileCredentials
from .blob_reads import read_body
from .errors import (
    CONDITION_FAILED,
    MISSING,
    REQUEST_FAILED,
    PreconditionFailed,
    first_line,
    request_failed,
)
from .settings import S3Settings

if TYPE_CHECKING:
    from obstore import Attributes, PutMode
    from obstore.store import ClientConfig, RetryConfig, S3Config

#: DeleteObjects takes at most this many keys; batches go one after the other.
_DELETE_BATCH = 1000
_LIST_PAGE = 1000
_REV_ATTRIBUTE = "rev"
#: User metadata naming who created an agent or run (the token's name), beside its
#: document: updates carry it over from the object they replace.
_CREATOR_ATTRIBUTE = "created-by"
_SETTLE_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class StoredObject:
    body: bytes
    etag: str
    #: The write token the object was stored with (user metadata ``rev``).
    rev: str | None
    #: Who created it (user metadata ``created-by``), for agents and runs.
    creator: str | None = None


@dataclass(frozen=True, slots=True)
class ObjectHead:
    etag: str
    rev: str | None
    creator: str | None = None


@dataclass(frozen=True, slots=True)
class Listed:
    key: str
    last_modified: datetime


def _store_options(s: S3Settings, request_timeout: float | None = None) -> dict[str, Any]:
    """obstore's options; ``request_timeout`` (default ``s.request_timeout``) bounds one
    request whole."""
    if request_timeout is None:
        request_timeout = s.request_timeout
    config: S3Config = {}
    if s.endpoint_url is not None:
        config["endpoint"] = s.endpoint_url
    if s.addressing_style != "auto":
        config["virtual_hosted_style_request"] = s.addressing_style == "virtual"
    client: ClientConfig = {
        "connect_timeout": timedelta(seconds=s.connect_timeout),
        "timeout": timedelta(seconds=request_timeout),
        # A read that waits this long ends the request: a checkpoint blob may take up
        # to blob_timeout while bytes flow, but a stalled connection (a partition drops
        # packets) is given up after request_timeout like any other request.
        "read_timeout": timedelta(seconds=s.request_timeout),
        # The endpoint (from the URL or AWS_ENDPOINT_URL[_S3]) says whether plain HTTP
        # is meant: MinIO, LocalStack and moto are usually reached that way.
        "allow_http": (s.endpoint_url or "").startswith("http://"),
    }
    retry: RetryConfig = {
        "max_retries": s.max_attempts - 1,
        "backoff": {
            "init_backoff": timedelta(milliseconds=100),
            "max_backoff": timedelta(seconds=2),
            "base": 2,
        },
        # No new try starts after this: an outage answers unavailable in about one
        # request's time, whether it refuses connections (quick tries) or drops them
        # (one try, ended by a timeout). A blob transfer that fails later, after
        # bytes have flowed, is the client's to retry.
        "retry_timeout": timedelta(seconds=s.request_timeout),
    }
    options: dict[str, Any] = {"config": config, "client_options": client, "retry_config": retry}
    # As in the AWS CLI: keys in the environment beat AWS_PROFILE, not profile=.
    profile = s.profile
    if profile is None and "AWS_ACCESS_KEY_ID" not in os.environ:
        profile = os.environ.get("AWS_PROFILE")
    if s.access_key_id is not None and s.secret_access_key is not None:
        config["access_key_id"] = s.access_key_id
        config["secret_access_key"] = s.secret_access_key
        if s.session_token is not None:
            config["session_token"] = s.session_token
    elif profile:
        # object_store reads AWS_* variables, web identity, ECS and EC2 metadata
        # itself, but not ~/.aws profiles: botocore resolves those.
        provider = ProfileCredentials(profile)
        options["credential_provider"] = provider
        if s.region is None and provider.region is not None:
            config["region"] = provider.region
    if s.region is not None:
        config["region"] = s.region
    return options


#: What object_store says when it could not get an answer at all (vs. an error answer).
_UNREACHABLE = ("error sending request", "timed out", "onnection refused", "dns error")
#: Where object_store asks for instance-role credentials when nothing else gave any.
_INSTANCE_METADATA = "169.254.169.254"
#: Variables through which object_store finds credentials without instance metadata.
_CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


def _credentials_configured(s: S3Settings) -> bool:
    """Whether credentials were given anywhere but instance metadata."""
    return (
        s.access_key_id is not None
        or s.profile is not None
        or any(os.environ.get(name) for name in _CREDENTIAL_ENV)
    )


class Bucket:
    """One bucket, opened with :meth:`start` and released with :meth:`close`."""

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        #: For every request but a checkpoint blob's: bounded by ``request_timeout``.
        self._store: S3Store | None = None
        #: For a checkpoint blob's GET and PUT, body included: ``blob_timeout``.
        self._blob_store: S3Store | None = None
        # object_store opens as many connections as there are requests: this bounds
        # what one list page fans out.
        self._slots = asyncio.Semaphore(settings.max_connections)

    async def start(self) -> None:
        try:
            settings = self.settings
            self._store = S3Store(
                settings.bucket, **_store_options(settings, settings.request_timeout)
            )
            self._blob_store = S3Store(
                settings.bucket, **_store_options(settings, settings.blob_timeout)
            )
        except BaseError as error:
            raise ConfigurationError(
                f"cannot set up S3 for {self.settings.describe()}: {first_line(error)}"
            ) from None

    async def close(self) -> None:
        self._store = self._blob_store = None
        # obstore resolves each Python future from a tokio thread that goes on to
        # release its Python references; if the interpreter starts finalizing in that
        # window, the thread panics and the process aborts (SIGABRT at exit, seen in
        # 3 of 40 `bridge-store db current` runs; a known pyo3-async-runtimes race).
        # Every request has been answered by now: a pause lets those threads finish.
        await asyncio.sleep(_SETTLE_SECONDS)

    @property
    def _s3(self) -> S3Store:
        if self._store is None:
            raise unavailable(f"the S3 store {self.settings.describe()} is not started")
        return self._store

    def _for(self, blob: bool) -> S3Store:
        if not blob:
            return self._s3
        if self._blob_store is None:
            raise unavailable(f"the S3 store {self.settings.describe()} is not started")
        return self._blob_store

    def _fail(self, what: str, error: BaseException) -> NoReturn:
        raise request_failed(what, self.settings.describe(), error) from None

    # -- operations --------------------------------------------------------------------

    async def check(self) -> None:
        """Fail fast at start-up when the bucket is missing, denied or unreachable."""
        try:
            async with self._slots:
                stream = obstore.list(self._s3, prefix=self.settings.prefix or None, chunk_size=1)
                async for _ in stream:
                    break
        except REQUEST_FAILED as error:
            if _INSTANCE_METADATA in str(error) and not _credentials_configured(self.settings):
                raise ConfigurationError(
                    f"no AWS credentials found for {self.settings.describe()}: set "
                    "access_key_id and secret_access_key in the store URL, "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (the "
                    f"instance metadata service at {_INSTANCE_METADATA}, the last place "
                    "looked, did not answer)"
                ) from None
            if "NoSuchBucket" in str(error):
                raise ConfigurationError(
                    f"bucket {self.settings.bucket!r} does not exist "
                    f"({self.settings.describe()}); create it first"
                ) from None
            problem = (
                BackendUnreachable
                if any(sign in str(error) for sign in _UNREACHABLE)
                else ConfigurationError
            )
            raise problem(
                f"cannot list bucket {self.settings.bucket!r} ({self.settings.describe()}): "
                f"{first_line(error)}; check the endpoint and the credentials"
            ) from None

    async def get(self, key: str, *, blob: bool = False) -> StoredObject | None:
        """The object at ``key``, or None; ``blob``: a checkpoint's (``blob_timeout``)."""
        try:
            async with self._slots:
                result = await obstore.get_async(self._for(blob), key)
                # A blob's body as it streams in (blob_reads.py): no long copy on the loop.
                body = await read_body(result) if blob else bytes(await result.bytes_async())
        except MISSING:
            return None
        except REQUEST_FAILED as error:
            self._fail("GET", error)
        attributes = result.attributes
        return StoredObject(
            body=body,
            etag=result.meta["e_tag"] or "",
            rev=_rev(attributes),
            creator=attributes.get(_CREATOR_ATTRIBUTE),
        )

    async def head(self, key: str) -> ObjectHead | None:
        try:
            async with self._slots:
                # A HEAD request that also returns the user metadata.
                result = await obstore.get_async(self._s3, key, options={"head": True})
        except MISSING:
            return None
        except REQUEST_FAILED as error:
            self._fail("HEAD", error)
        attributes = result.attributes
        return ObjectHead(
            etag=result.meta["e_tag"] or "",
            rev=_rev(attributes),
            creator=attributes.get(_CREATOR_ATTRIBUTE),
        )

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        rev: str | None = None,
        if_none_match: bool = False,
        if_match: str | None = None,
        blob: bool = False,
        creator: str | None = None,
    ) -> str:
        """Store ``body`` at ``key`` in one PUT and return its ETag.

        ``blob``: the body is a checkpoint blob, bounded by ``blob_timeout``.
        ``creator``: who created the document, kept in its user metadata.

        ``if_none_match`` writes only if the key is absent and ``if_match`` only if its
        ETag is unchanged (and the object still there); a failed condition raises
        :class:`PreconditionFailed`. A 412 can also answer a write of ours that
        succeeded but whose response was lost and retried: callers tell the two apart
        by ``rev``.
        """
        mode: PutMode = "overwrite"
        if if_none_match:
            mode = "create"
        elif if_match is not None:
            mode = {"e_tag": if_match}
        attributes: Attributes = {_REV_ATTRIBUTE: rev} if rev is not None else {}
        if creator is not None:
            attributes[_CREATOR_ATTRIBUTE] = creator
        try:
            async with self._slots:
                result = await obstore.put_async(
                    self._for(blob),
                    key,
                    body,
                    mode=mode,
                    attributes=attributes,
                    use_multipart=False,
                )
        except CONDITION_FAILED:
            raise PreconditionFailed(key) from None
        except REQUEST_FAILED as error:
            self._fail("PUT", error)
        return result["e_tag"] or ""

    async def list_page(
        self, prefix: str, *, start_after: str | None = None, max_keys: int = _LIST_PAGE
    ) -> tuple[list[Listed], bool]:
        """Up to ``max_keys`` keys under ``prefix`` after ``start_after``; more follow?"""
        wanted = max(1, max_keys)
        listed: list[Listed] = []
        try:
            async with self._slots:
                stream = obstore.list(
                    self._s3, prefix=prefix, offset=start_after, chunk_size=wanted + 1
                )
                async for chunk in stream:
                    listed.extend(Listed(meta["path"], meta["last_modified"]) for meta in chunk)
                    if len(listed) > wanted:
                        break
        except REQUEST_FAILED as error:
            self._fail("LIST", error)
        return listed[:wanted], len(listed) > wanted

    async def child_names(self, prefix: str) -> list[str]:
        """The names of the "directories" right under ``prefix`` (which ends in ``/``)."""
        try:
            async with self._slots:
                result = await obstore.list_with_delimiter_async(self._s3, prefix=prefix)
        except REQUEST_FAILED as error:
            self._fail("LIST", error)
        return [common[len(prefix) :].rstrip("/") for common in result["common_prefixes"]]

    async def iter_keys(self, prefix: str, *, start_after: str | None = None) -> AsyncIterator[str]:
        """Every key under ``prefix`` (after ``start_after``), ascending, page by page."""
        while True:
            page, more = await self.list_page(prefix, start_after=start_after)
            for item in page:
                yield item.key
            if not more:
                return
            start_after = page[-1].key

    async def delete(self, keys: Iterable[str]) -> None:
        """Delete keys in the given order, one DeleteObjects batch after the other."""
        batch: list[str] = []
        for key in keys:
            batch.append(key)
            if len(batch) == _DELETE_BATCH:
                await self._delete_batch(batch)
                batch = []
        if batch:
            await self._delete_batch(batch)

    async def _delete_batch(self, keys: Sequence[str]) -> None:
        try:
            async with self._slots:
                await obstore.delete_async(self._s3, keys)
        except REQUEST_FAILED as error:
            self._fail("DeleteObjects", error)


def _rev(attributes: Attributes) -> str | None:
    return attributes.get(_REV_ATTRIBUTE)


async def backoff(attempt: int) -> None:
    """Full-jitter exponential backoff: 0..10 ms, 0..20 ms ... capped at 0..500 ms."""
    await asyncio.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))
