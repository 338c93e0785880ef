"""Store URLs shown to people: never with their secrets."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: Query parameters that carry credentials in some backend's URL (S3 keys, a password).
_SECRET_QUERY = re.compile(r"((?:^|&)(?:secret_access_key|session_token|password)=)[^&]*")


def redact(url: str) -> str:
    """``url`` with its password and secret query parameters replaced by ``***``."""
    parts = urlsplit(url)
    query = _SECRET_QUERY.sub(r"\1***", parts.query)
    if parts.password is None and query == parts.query:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        # rsplit: a password may itself contain "@".
        host = netloc.rsplit("@", 1)[1]
        netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit(parts._replace(netloc=netloc, query=query))
