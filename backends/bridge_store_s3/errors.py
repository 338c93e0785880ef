"""S3 failures: the one condition callers act on, and everything else as ``unavailable``.

A conditional write that loses (412, or 409 from stores that answer a create that
way) is :class:`PreconditionFailed`, which the algorithms above the bucket retry or
resolve. Every other failure (refused or lost connections, timeouts, throttling and
5xx answers once the bounded retries are spent, denied access) leaves as
``unavailable``: the client may try again later.
"""

from __future__ import annotations

from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError

from bridge_store.errors import ConnectError, unavailable


class PreconditionFailed(Exception):
    """412: ``If-None-Match: *`` met an existing key, or ``If-Match`` a changed or
    missing object."""


#: obstore reports a missing object as the built-in FileNotFoundError (get) or its own
#: NotFoundError.
MISSING = (FileNotFoundError, NotFoundError)
#: What obstore raises when a conditional write's condition does not hold.
CONDITION_FAILED = (AlreadyExistsError, PreconditionError)
#: What a request that did not get its answer raises.
REQUEST_FAILED = (BaseError, OSError)


def first_line(error: BaseException) -> str:
    """The error's message without the multi-line debug dump object_store appends."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def request_failed(what: str, where: str, error: BaseException) -> ConnectError:
    """``unavailable``: the S3 request ``what`` to ``where`` failed with ``error``."""
    return unavailable(f"S3 {what} failed for {where}: {first_line(error)}")
