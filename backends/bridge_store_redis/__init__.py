"""The Redis backend (``redis://`` and ``rediss://``): every substore, with redis-py's
asyncio client. Needs the ``redis`` extra; the URL format is in
:mod:`bridge_store_redis.settings`, the key layout in :mod:`bridge_store_redis.keys`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bridge_store import hookimpl
from bridge_store.backend.substores import BackendOptions
from bridge_store.errors import ConfigurationError

from .settings import SCHEMES, parse_url

if TYPE_CHECKING:
    from .backend import RedisBackend

INSTALL_HINT = "pip install 'bridge-store[redis]'"


@hookimpl
def bridge_store_url_schemes() -> list[str]:
    return list(SCHEMES)


@hookimpl
def bridge_store_open_backend(url: str, options: BackendOptions) -> RedisBackend | None:
    if urlsplit(url).scheme not in SCHEMES:
        return None
    settings = parse_url(url, options.timeout)
    try:
        # redis-py loads only when a Redis URL is chosen, and may be absent.
        from .backend import RedisBackend
    except ImportError as error:
        if error.name is None or not error.name.startswith("redis"):
            raise
        raise ConfigurationError(
            f"redis:// stores need redis-py, which is not installed: {INSTALL_HINT}"
        ) from None
    return RedisBackend(settings, options)
