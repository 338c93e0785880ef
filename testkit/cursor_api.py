"""The stand-in Cursor API the tests and benchmarks run the real bridge on.

It is the product's own offline stand-in (``bridge-store bridge --offline``,
:mod:`bridge_store.client.offline_api`), under the names the suite has always used.
"""

from __future__ import annotations

from bridge_store.client.offline_api import (
    ACCESS_TOKEN,
    EXCHANGE_PATH,
    MODEL_ID,
    MODELS_PATH,
    REFUSAL_MESSAGE,
    RUN_PATH,
    OfflineCursorApi,
    Request,
)

#: The suite's name for :class:`~bridge_store.client.offline_api.OfflineCursorApi`.
CursorApiStub = OfflineCursorApi

__all__ = [
    "ACCESS_TOKEN",
    "EXCHANGE_PATH",
    "MODELS_PATH",
    "MODEL_ID",
    "REFUSAL_MESSAGE",
    "RUN_PATH",
    "CursorApiStub",
    "Request",
]
