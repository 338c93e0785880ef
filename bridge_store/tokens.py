"""The bearer token: where it comes from, and generating one safely when none is set."""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigurationError

TOKEN_ENV = "BRIDGE_STORE_AUTH_TOKEN"  # noqa: S105 - a variable name, not a secret
DEFAULT_TOKEN_FILE = "bridge-store.token"  # noqa: S105 - a file name, not a secret


@dataclass(frozen=True, slots=True)
class AuthToken:
    value: str
    #: Set when this process generated the token and wrote it here.
    generated_file: Path | None = None


def load_or_generate(token_file: str | None, environ: dict[str, str]) -> AuthToken:
    """The token from the environment, else from ``token_file``, else a new one.

    A new token is written to ``token_file`` (or ``./bridge-store.token``) with mode
    0600, so the bridge's launcher can read it; the token itself is never printed.
    """
    from_env = environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return AuthToken(from_env)
    path = Path(token_file or DEFAULT_TOKEN_FILE)
    if token_file is not None and path.exists():
        return AuthToken(read_token_file(path))
    value = new_token()
    write_private(path, value)
    return AuthToken(value, generated_file=path.resolve())


def new_token() -> str:
    """A random bearer token, 256 bits in hex (serve's, the launcher's, ``token add``'s).

    Not base64url: one such token in 64 starts with "-", and the bridge of cursor-sdk
    0.1.9 takes a "-" after --store-callback-auth-token for a missing value.
    """
    return secrets.token_hex(32)


def read_auth_token(token_file: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str:
    """A running store's token, for a client: the environment's, else ``token_file``'s."""
    from_env = environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return from_env
    if token_file is None:
        raise ConfigurationError(f"no store token: set {TOKEN_ENV} or pass --store-auth-token-file")
    return read_token_file(Path(token_file))


def read_token_file(path: Path) -> str:
    """The token in ``path``; ConfigurationError when it cannot be read or is empty."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigurationError(f"cannot read auth token file {path}: {error}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"auth token file {path} is not UTF-8 text") from None
    if not value:
        raise ConfigurationError(f"auth token file {path} is empty")
    return value


def write_private(path: Path, value: str) -> None:
    """Write ``value`` to ``path`` readable by the owner only, replacing it atomically.

    mkstemp creates the temporary file 0600 before any secret is written to it, so the
    token is never readable by others, even briefly.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(value + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
