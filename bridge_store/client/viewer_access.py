"""Where an embedded store's history can be seen: the file holding its viewer's token.

A store server that :func:`~bridge_store.client.launch` starts serves the history
viewer too (``viewerUrl`` in its ready line), but signing in takes the store's token.
A fresh random token nobody can read would make the viewer useless while the bridge
runs, so the embedded store's token lives in a file:

- Next to the agents' SQLite database (``agents.db`` -> ``agents.token``), so the
  default store, ``./bridge-store.db``, shares ``./bridge-store.token`` with ``serve``.
  The database holds every agent's ``blobEncryptionKey``: whoever can read it needs no
  token, and the token file, also its owner's alone, exposes nothing the database
  does not.
- For a store that is no file on this machine (Postgres, Redis, S3, ``memory://``),
  ``bridge-store bridge`` uses serve's default, ``./bridge-store.token``, and
  ``launch()`` keeps a fresh token in memory unless given ``auth_token_file``.

The file is created by :func:`~bridge_store.security.tokens.load_or_generate`: mode
0600 from its first byte, never replaced (one that exists is read, so a restart, a
second bridge or ``serve`` on the same store keep the same token), and warned about
when others can read it. The token itself is never printed or logged; messages name
the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ..security.tokens import AuthToken, load_or_generate

#: serve's storage variables for the agents substore, in the order serve reads them.
AGENTS_URL_ENV = ("BRIDGE_STORE_AGENTS_URL", "BRIDGE_STORE_URL")
#: serve's store when neither a flag nor a variable names one.
DEFAULT_STORE_URL = "sqlite:///bridge-store.db"
TOKEN_SUFFIX = ".token"  # noqa: S105 - a file name suffix, not a secret


def agents_url(store: str | None, agents: str | None, environ: Mapping[str, str]) -> str:
    """The agents substore's URL as the embedded ``serve`` resolves it: its flag, its
    variable, ``--store``, ``BRIDGE_STORE_URL``, the default."""
    if agents:
        return agents
    if environ.get(AGENTS_URL_ENV[0]):
        return environ[AGENTS_URL_ENV[0]]
    return store or environ.get(AGENTS_URL_ENV[1]) or DEFAULT_STORE_URL


def sqlite_file(url: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL (relative to the working directory, as
    serve reads it), or None for any other store."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc:
        return None
    # urlsplit keeps the leading slash: "/relative.db" or "//abs/path.db".
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return None if path in ("", ":memory:") else Path(path)


def token_file_beside(database: Path) -> Path:
    """``agents.db`` -> ``agents.token``; never the database's own name."""
    if database.suffix == TOKEN_SUFFIX:
        return database.with_name(database.name + TOKEN_SUFFIX)
    return database.with_suffix(TOKEN_SUFFIX)


def embedded_token_file(
    store: str | None, agents: str | None, environ: Mapping[str, str]
) -> Path | None:
    """The token file beside the embedded store's agents database, if that is SQLite."""
    database = sqlite_file(agents_url(store, agents, environ))
    return None if database is None else token_file_beside(database)


def token_from_file(path: str | os.PathLike[str]) -> AuthToken:
    """The token in ``path``, or a new one written there (0600); the environment's
    ``BRIDGE_STORE_AUTH_TOKEN`` does not count: the file is what the viewer's user reads."""
    return load_or_generate(os.fspath(path), {})
