"""Reading a TOML file a person wrote (``--config``, ``--prices``): every way it can be
wrong is one line naming the file, never a traceback."""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError

#: No settings file or price table comes near this: a larger file is a mistake (a log,
#: a database, ``/dev/zero``), refused before it is read into memory.
MAX_TOML_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TomlFile:
    """A file's document and the bytes and status it was read from."""

    document: dict[str, Any]
    raw: bytes
    status: os.stat_result


def load_toml(path: str | os.PathLike[str], flag: str, what: str) -> dict[str, Any]:
    """The document in the file at ``path``, given by ``flag`` and holding ``what``.

    Unreadable, not a regular file (a FIFO, a device, a directory), larger than
    :data:`MAX_TOML_BYTES`, not UTF-8, not TOML, or nested too deeply for tomllib (it
    recurses once per nested array or inline table, and no settings file nests at
    all): each is a :class:`ConfigurationError` of one line.
    """
    return read_toml(path, flag, what).document


def read_toml(
    path: str | os.PathLike[str],
    flag: str,
    what: str,
    *,
    parse_float: Callable[[str], Any] = float,
) -> TomlFile:
    """:func:`load_toml`, keeping the bytes and the status of the file read;
    ``parse_float`` as tomllib's (``decimal.Decimal`` for exact prices)."""
    where = f"{flag} {os.fspath(path)}"
    raw, status = _read_bounded(path, where, what)
    try:
        document = tomllib.loads(raw.decode("utf-8"), parse_float=parse_float)
    except UnicodeDecodeError:
        raise ConfigurationError(f"{where}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{where}: not TOML: {error}") from None
    except RecursionError:
        raise ConfigurationError(f"{where}: nested too deeply to be {what}") from None
    return TomlFile(document, raw, status)


def _read_bounded(
    path: str | os.PathLike[str], where: str, what: str
) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at ``path``, at most :data:`MAX_TOML_BYTES` of them,
    and its status."""
    try:
        # O_NONBLOCK: opening a FIFO to read waits for a writer otherwise, for ever. It
        # changes nothing for a regular file, the only kind read here.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ConfigurationError(f"{where}: cannot read it: {error.strerror}") from None
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        kind = "a directory" if stat.S_ISDIR(status.st_mode) else "a FIFO, socket or device"
        raise ConfigurationError(f"{where}: not a regular file (it is {kind})")
    with os.fdopen(descriptor, "rb") as handle:
        try:
            # One byte more than the bound tells a file that grew past it meanwhile.
            raw = handle.read(MAX_TOML_BYTES + 1)
        except OSError as error:
            raise ConfigurationError(f"{where}: cannot read it: {error.strerror}") from None
    if len(raw) > MAX_TOML_BYTES:
        limit = MAX_TOML_BYTES // (1024 * 1024)
        raise ConfigurationError(f"{where}: larger than {limit} MiB, too large to be {what}")
    return raw, status
