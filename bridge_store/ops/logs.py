"""One logging configuration for uvicorn's loggers and bridge-store's: text or JSON lines.

``serve`` applies :func:`logging_config` with ``logging.config.dictConfig`` before
anything else runs, so every record (uvicorn's, bridge-store's, a backend's, a
library's warning) leaves through one handler on stderr in one format, and none
through logging's last-resort handler.

JSON lines carry ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``, and
for a record made while a CallStore call runs its ``request_id``, ``substore`` and
``method`` (from :data:`~bridge_store.ops.observe.CURRENT_CALL`); the access line of a
call adds ``code`` and ``duration_ms``. The formatter is written here rather than
taken from python-json-logger: it is a dozen lines over ``orjson``, already a
dependency, and the field names are ours either way.

Only bridge-store's own loggers and uvicorn's follow ``--log-level``;
every other library logs warnings and worse. That keeps SQLAlchemy's statement
logging (whose parameters are documents) and HTTP clients' request dumps (whose
headers carry credentials) out of the log even at ``debug``.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import orjson

from ..rpc.connect import CALL_STORE_PATH
from .observe import CURRENT_CALL

LOG_FORMATS = ("text", "json")
#: The loggers ``--log-level`` applies to; every other one logs at WARNING and above.
OWN_LOGGERS = (
    "bridge_store",
    "bridge_store_memory",
    "bridge_store_sql",
    "bridge_store_redis",
    "bridge_store_s3",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
)
#: Call fields a record may carry, in the order lines show them.
CALL_FIELDS = ("request_id", "substore", "method", "code", "duration_ms")


class CallContext(logging.Filter):
    """Gives a record made during a CallStore call that call's id, substore and method."""

    def filter(self, record: logging.LogRecord) -> bool:
        call = CURRENT_CALL.get()
        if call is not None and not hasattr(record, "request_id"):
            record.request_id = call.request_id
            record.substore = call.substore
            record.method = call.method
        return True


class ServerLoggerName(logging.Filter):
    """Names uvicorn's server lines ``uvicorn``, not ``uvicorn.error``.

    uvicorn logs everything but access lines (its start, its stop, a malformed
    request) through a logger it calls ``uvicorn.error``, so "Started server process"
    read as an error, and a filter on the logger's name caught INFO lines.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.error":
            record.name = "uvicorn"
        return True


class SkipCallStoreAccess(logging.Filter):
    """Drops uvicorn's access line for CallStore: its own access line says more."""

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn's access records: (client, method, path with query, version, status).
        args = record.args
        if not (isinstance(args, tuple) and len(args) > 2 and isinstance(args[2], str)):
            return True
        # A workspace's CallStore path (/w/<segment>/...) too: the segment names a
        # developer's checkout, which a log line has no need of.
        return not (args[2] == CALL_STORE_PATH or args[2].endswith(CALL_STORE_PATH))


def _call_fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = {}
    for name in CALL_FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            fields[name] = value
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_call_fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER: message request_id=...`` for people reading a terminal.

    Only the request id is added: a call's access line already says its substore,
    method, code and duration, and the id ties any other line to it.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        request = getattr(record, "request_id", None)
        return line if request is None else f"{line} request_id={request}"


def logging_config(log_format: str, level: str) -> dict[str, Any]:
    """The ``dictConfig`` of ``serve``: ``log_format`` text or json, ``level`` as the flag."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, not {log_format!r}")
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    own_level = level.upper()
    loggers: dict[str, Any] = {
        name: {"level": own_level, "handlers": [], "propagate": True} for name in OWN_LOGGERS
    }
    loggers["uvicorn.access"]["filters"] = ["skip_call_store_access"]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "call_context": {"()": CallContext},
            "server_logger_name": {"()": ServerLoggerName},
            "skip_call_store_access": {"()": SkipCallStoreAccess},
        },
        "formatters": {"line": {"()": formatter}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "line",
                "filters": ["server_logger_name", "call_context"],
            }
        },
        "loggers": loggers,
        "root": {"level": "WARNING", "handlers": ["stderr"]},
    }
