"""The few S3 operations the backend needs, over aiobotocore, with errors mapped.

Everything above this module speaks in keys, bytes, ETags and two exceptions
(:class:`PreconditionFailed`, :class:`ObjectMissing`); every other failure (refused or
lost connections, timeouts, throttling and 5xx answers once botocore's bounded retries
are spent, a missing bucket, denied access) leaves as ``unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

import aiohttp
from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession
from botocore.exceptions import BotoCoreError, ClientError

from bridge_store.errors import ConfigurationError, ConnectError, unavailable

from ._config import S3Settings

log = logging.getLogger("bridge_store_s3")

#: DeleteObjects takes at most this many keys.
_DELETE_BATCH = 1000
#: 409 ConditionalRequestConflict means another conditional write to the key is in
#: flight; AWS asks clients to retry it. These many tries, then ``unavailable``.
_CONFLICT_TRIES = 6
_REV_HEADER = "rev"


class PreconditionFailed(Exception):
    """412: ``If-None-Match: *`` met an existing key, or ``If-Match`` a changed ETag."""


class ObjectMissing(Exception):
    """404 for a write that needed the key to exist (``If-Match``)."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    body: bytes
    etag: str
    #: The write token the object was stored with (user metadata ``rev``).
    rev: str | None


@dataclass(frozen=True, slots=True)
class ObjectHead:
    etag: str
    rev: str | None


@dataclass(frozen=True, slots=True)
class Listed:
    key: str
    last_modified: datetime


def _code(error: ClientError) -> tuple[str, int]:
    info = error.response.get("Error", {})
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return str(info.get("Code", "")), int(status)


_TRANSPORT_ERRORS = (BotoCoreError, aiohttp.ClientError, OSError, asyncio.TimeoutError)


class Bucket:
    """One bucket, opened with :meth:`start` and released with :meth:`close`."""

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._client: Any = None
        self._exit_stack = contextlib.AsyncExitStack()

    async def start(self) -> None:
        s = self.settings
        session = AioSession(profile=s.profile)
        config = AioConfig(
            region_name=s.region,
            connect_timeout=s.connect_timeout,
            read_timeout=s.read_timeout,
            max_pool_connections=s.max_connections,
            retries={"total_max_attempts": s.max_attempts, "mode": "standard"},
            s3={"addressing_style": s.addressing_style},
            # Checksums only where S3 demands them (DeleteObjects): several
            # S3-compatible stores reject the newer default trailing checksums.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        credentials: dict[str, str] = {}
        if s.access_key_id is not None and s.secret_access_key is not None:
            credentials["aws_access_key_id"] = s.access_key_id
            credentials["aws_secret_access_key"] = s.secret_access_key
            if s.session_token is not None:
                credentials["aws_session_token"] = s.session_token
        try:
            self._client = await self._exit_stack.enter_async_context(
                session.create_client(
                    "s3", endpoint_url=s.endpoint_url, config=config, **credentials
                )
            )
        except BotoCoreError as error:
            raise ConfigurationError(f"cannot set up S3 for {s.describe()}: {error}") from None

    async def close(self) -> None:
        await self._exit_stack.aclose()
        self._client = None

    # -- error mapping -----------------------------------------------------------------

    def _fail(self, what: str, detail: str) -> NoReturn:
        raise unavailable(f"S3 {what} failed for {self.settings.describe()}: {detail}")

    async def _call(
        self, what: str, operation: Callable[..., Awaitable[Any]], **params: Any
    ) -> Any:
        """Run one S3 operation; ClientError passes through for the caller to read."""
        if self._client is None:
            raise unavailable(f"the S3 store {self.settings.describe()} is not started")
        try:
            return await operation(Bucket=self.settings.bucket, **params)
        except ClientError:
            raise
        except _TRANSPORT_ERRORS as error:
            self._fail(what, f"{type(error).__name__}: {error}")

    def _unexpected(self, what: str, error: ClientError) -> NoReturn:
        code, status = _code(error)
        if code == "NoSuchBucket":
            self._fail(what, "the bucket does not exist")
        if status == 403:
            self._fail(what, f"access denied ({code})")
        self._fail(what, f"{code or 'error'} (HTTP {status})")

    # -- operations --------------------------------------------------------------------

    async def check(self) -> None:
        """Fail fast at start-up when the bucket is missing or unreachable."""
        try:
            await self._call("HeadBucket", self._client.head_bucket)
        except ClientError as error:
            code, status = _code(error)
            if status == 404:
                raise ConfigurationError(
                    f"bucket {self.settings.bucket!r} does not exist "
                    f"({self.settings.describe()}); create it first"
                ) from None
            raise ConfigurationError(
                f"cannot use bucket {self.settings.bucket!r}: {code or status}"
            ) from None
        except ConnectError as error:
            raise ConfigurationError(error.message) from None

    async def get(self, key: str) -> StoredObject | None:
        try:
            response = await self._call("GetObject", self._client.get_object, Key=key)
            async with response["Body"] as stream:
                body = await self._read(stream)
        except ClientError as error:
            if _code(error)[1] == 404:
                return None
            self._unexpected("GetObject", error)
        return StoredObject(
            body=body, etag=response["ETag"], rev=response.get("Metadata", {}).get(_REV_HEADER)
        )

    async def _read(self, stream: Any) -> bytes:
        try:
            data: bytes = await stream.read()
        except _TRANSPORT_ERRORS as error:
            self._fail("GetObject", f"{type(error).__name__}: {error}")
        return data

    async def head(self, key: str) -> ObjectHead | None:
        try:
            response = await self._call("HeadObject", self._client.head_object, Key=key)
        except ClientError as error:
            if _code(error)[1] == 404:
                return None
            self._unexpected("HeadObject", error)
        return ObjectHead(etag=response["ETag"], rev=response.get("Metadata", {}).get(_REV_HEADER))

    async def put(
        self,
        key: str,
        body: bytes,
        *,
        rev: str | None = None,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        """Store ``body`` at ``key`` and return its ETag.

        ``if_none_match`` writes only if the key is absent and ``if_match`` only if its
        ETag is unchanged; either condition failing raises :class:`PreconditionFailed`,
        ``if_match`` on a missing key :class:`ObjectMissing`. A 412 can also answer a
        write of ours that succeeded but whose response was lost and retried: callers
        tell the two apart by ``rev``.
        """
        params: dict[str, Any] = {"Key": key, "Body": body}
        if rev is not None:
            params["Metadata"] = {_REV_HEADER: rev}
        if if_none_match:
            params["IfNoneMatch"] = "*"
        if if_match is not None:
            params["IfMatch"] = if_match
        for attempt in range(_CONFLICT_TRIES):
            try:
                response = await self._call("PutObject", self._client.put_object, **params)
            except ClientError as error:
                code, status = _code(error)
                if status == 412:
                    raise PreconditionFailed(key) from None
                if status == 404 and if_match is not None:
                    raise ObjectMissing(key) from None
                if status == 409 and code == "ConditionalRequestConflict":
                    await backoff(attempt)
                    continue
                self._unexpected("PutObject", error)
            etag: str = response["ETag"]
            return etag
        self._fail("PutObject", f"conditional writes to {key} kept conflicting")

    async def list_page(
        self, prefix: str, *, start_after: str | None = None, max_keys: int = 1000
    ) -> tuple[list[Listed], bool]:
        """Up to ``max_keys`` keys under ``prefix`` after ``start_after``; more follow?"""
        params: dict[str, Any] = {"Prefix": prefix, "MaxKeys": max(1, min(max_keys, 1000))}
        if start_after is not None and start_after > prefix:
            params["StartAfter"] = start_after
        try:
            response = await self._call("ListObjectsV2", self._client.list_objects_v2, **params)
        except ClientError as error:
            self._unexpected("ListObjectsV2", error)
        listed = [
            Listed(key=item["Key"], last_modified=item["LastModified"])
            for item in response.get("Contents", [])
        ]
        return listed, bool(response.get("IsTruncated")) and bool(listed)

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
        request = {"Objects": [{"Key": key} for key in keys], "Quiet": True}
        try:
            response = await self._call(
                "DeleteObjects", self._client.delete_objects, Delete=request
            )
        except ClientError as error:
            self._unexpected("DeleteObjects", error)
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            self._fail(
                "DeleteObjects",
                f"{len(errors)} keys not deleted ({first.get('Code')}: {first.get('Message')})",
            )


async def backoff(attempt: int) -> None:
    """Full-jitter exponential backoff: 0..10 ms, 0..20 ms ... capped at 0..500 ms."""
    await asyncio.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))
