"""The S3 backend (``s3://bucket/prefix``): every substore on S3 alone, no database.

Correctness comes from S3 conditional writes (``If-None-Match: *``, ``If-Match``);
see docs/s3.md for the layout and its costs. obstore is imported only when an
``s3://`` URL is opened, so the core works without the ``s3`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bridge_store import hookimpl
from bridge_store.backend.substores import BackendOptions
from bridge_store.errors import ConfigurationError

from .settings import parse_url

if TYPE_CHECKING:
    from .backend import S3Backend

SCHEMES = ["s3"]


@hookimpl
def bridge_store_url_schemes() -> list[str]:
    return SCHEMES


@hookimpl
def bridge_store_open_backend(url: str, options: BackendOptions) -> S3Backend | None:
    if urlsplit(url).scheme not in SCHEMES:
        return None
    settings = parse_url(url, options.timeout)
    try:
        from .backend import S3Backend
    except ImportError as error:
        raise ConfigurationError(
            f"s3:// stores need obstore ({error}): pip install 'bridge-store[s3]'"
        ) from None
    return S3Backend(settings)
