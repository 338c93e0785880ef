"""The bearer token: where it comes from, and generating one safely when none is set."""

from __future__ import annotations

import logging
import os
import secrets
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError

TOKEN_ENV = "BRIDGE_STORE_AUTH_TOKEN"  # noqa: S105 - a variable name, not a secret
DEFAULT_TOKEN_FILE = "bridge-store.token"  # noqa: S105 - a file name, not a secret


#: The shortest token serve accepts: a short one can be guessed over the network.
MIN_TOKEN_LENGTH = 16

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AuthToken:
    value: str
    #: Set when this process generated the token and wrote it here.
    generated_file: Path | None = None


def load_or_generate(token_file: str | None, environ: Mapping[str, str]) -> AuthToken:
    """The token from the environment, else from the token file, else a new one in it.

    The token file is ``token_file``, or ``./bridge-store.token``; both behave alike: a
    file that exists is read (a restarted server keeps its clients working), one that
    does not is created with a new token, mode 0600, so the bridge's launcher can read
    it. A file that another process creates meanwhile is read, never replaced. The
    token itself is never printed. A token shorter than :data:`MIN_TOKEN_LENGTH` is a
    ConfigurationError; a token file that others can read is warned about.
    """
    from_env = environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return AuthToken(_strong(from_env, TOKEN_ENV))
    path = Path(token_file or DEFAULT_TOKEN_FILE)
    if not path.exists():
        value = new_token()
        if create_private(path, value):
            return AuthToken(value, generated_file=path.resolve())
    value = _strong(read_token_file(path), f"auth token file {path}")
    _warn_if_readable_by_others(path)
    return AuthToken(value)


def _strong(value: str, source: str) -> str:
    if len(value) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"the token in {source} is {len(value)} characters long; use at least "
            f"{MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)"
        )
    return value


def _warn_if_readable_by_others(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # read_token_file says what is wrong with it
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning(
            "auth token file %s can be read by other users (mode %s): chmod 600 %s",
            path,
            oct(stat.S_IMODE(mode))[2:],
            path,
        )


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


def create_private(path: Path, value: str) -> bool:
    """Create ``path`` holding ``value``, readable by the owner only; False if it exists.

    The token is written to a temporary file that mkstemp creates 0600, so it is never
    readable by others, even briefly, then linked into place: the link fails rather
    than replace a file another process created meanwhile, and a reader never sees a
    half-written token.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as error:
        raise ConfigurationError(
            f"cannot create the auth token file {path}: {error.strerror}; choose a writable "
            f"place with --auth-token-file, or set {TOKEN_ENV}"
        ) from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(value + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError:
            # A file system without hard links: create the file exclusively instead.
            return _create_exclusively(path, value)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return True


def write_private(path: Path, value: str) -> None:
    """Write ``value`` to ``path`` readable by the owner only, replacing it atomically.

    For files this process owns and may replace (a tokens file, a key file). mkstemp
    creates the temporary file 0600 before any secret is written to it, so the value is
    never readable by others, even briefly.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(value + "\n")
            # On disk before the rename: a crash never leaves an empty file in place.
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (where the file system allows it)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename itself is atomic
    finally:
        os.close(descriptor)


def _create_exclusively(path: Path, value: str) -> bool:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return True
