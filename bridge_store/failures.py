"""Unexpected failures, logged by what they are and where, never by what they carry.

An exception's message can hold the data it failed on: SQLAlchemy appends the
statement's parameters (a whole agent document, ``sdkMetadata.blobEncryptionKey``
included), a database error can quote the row, a driver the value it refused. So a
failure is logged as its class names along the exception chain, the SQLSTATE when
there is one, and the stack frames, which name code, not data.
"""

from __future__ import annotations

import logging
import traceback

#: Deepest exception chain followed (``__cause__`` / ``__context__``).
_MAX_CHAIN = 8


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain and len(chain) < _MAX_CHAIN:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _sqlstate(error: BaseException) -> str | None:
    for holder in (error, getattr(error, "orig", None)):
        code = getattr(holder, "sqlstate", None) or getattr(holder, "pgcode", None)
        if isinstance(code, str) and code.isalnum() and len(code) == 5:
            return code
    return None


def describe(error: BaseException) -> str:
    """``module.Class (SQLSTATE xxxxx) <- module.Cause``: the chain, without messages."""
    parts = []
    for link in _chain(error):
        kind = type(link)
        name = f"{kind.__module__}.{kind.__qualname__}"
        state = _sqlstate(link)
        parts.append(f"{name} (SQLSTATE {state})" if state else name)
    return " <- ".join(parts)


def stack(error: BaseException) -> str:
    """Where each exception of the chain was raised, outermost first; no messages."""
    blocks = []
    for link in _chain(error):
        frames = "".join(traceback.format_tb(link.__traceback__)).rstrip()
        blocks.append(f"{type(link).__qualname__} raised at:\n{frames}")
    return "\n".join(blocks)


def log_failure(logger: logging.Logger, what: str, error: BaseException) -> None:
    """Log an unexpected failure of ``what`` at ERROR: its classes, SQLSTATE and stack."""
    logger.error("%s failed: %s\n%s", what, describe(error), stack(error))
