"""Connect error codes and the one exception type that carries them.

Every failure that reaches a client is a :class:`ConnectError`; the wire layer turns
it into a Connect error body with the HTTP status the protocol assigns to its code.
Backends raise the same type (``already_exists``, ``not_found``, ``unavailable``) so
the protocol layer never needs to know which backend answered.
"""

from __future__ import annotations

import enum


class Code(enum.StrEnum):
    """Connect error codes (https://connectrpc.com/docs/protocol#error-codes)."""

    CANCELED = "canceled"
    UNKNOWN = "unknown"
    INVALID_ARGUMENT = "invalid_argument"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    PERMISSION_DENIED = "permission_denied"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    FAILED_PRECONDITION = "failed_precondition"
    ABORTED = "aborted"
    OUT_OF_RANGE = "out_of_range"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    DATA_LOSS = "data_loss"
    UNAUTHENTICATED = "unauthenticated"

    @property
    def http_status(self) -> int:
        return _HTTP_STATUS[self]


_HTTP_STATUS: dict[Code, int] = {
    Code.CANCELED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.FAILED_PRECONDITION: 400,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
    Code.UNAUTHENTICATED: 401,
}


class ConnectError(Exception):
    """A failure with a Connect code and a message meant for the client."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ConnectError({self.code.value!r}, {self.message!r})"


def invalid_argument(message: str) -> ConnectError:
    return ConnectError(Code.INVALID_ARGUMENT, message)


def already_exists(message: str) -> ConnectError:
    return ConnectError(Code.ALREADY_EXISTS, message)


def not_found(message: str) -> ConnectError:
    return ConnectError(Code.NOT_FOUND, message)


def unavailable(message: str) -> ConnectError:
    return ConnectError(Code.UNAVAILABLE, message)


class ConfigurationError(Exception):
    """A deployment mistake found at start-up (bad URL, missing extra); not a request error."""


class BackendUnreachable(ConfigurationError):
    """A backend did not answer at start-up (refused, timed out): it may answer later.

    A ConfigurationError (the server does not start) that a supervisor may retry;
    every other one needs a person to change something.
    """


#: Exit statuses of the ``bridge-store`` commands (docs/limits.md lists them).
EXIT_CONFIGURATION = 2
EXIT_UNREACHABLE = 3
#: Interrupted (SIGINT) before the server was up, as shells report it.
EXIT_INTERRUPTED = 130
