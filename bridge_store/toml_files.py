"""Reading a TOML file a person wrote (``--config``, ``--prices``): every way it can be
wrong is one line naming the file, never a traceback."""

from __future__ import annotations

import os
import tomllib
from typing import Any

from .errors import ConfigurationError


def load_toml(path: str | os.PathLike[str], flag: str, what: str) -> dict[str, Any]:
    """The document in the file at ``path``, given by ``flag`` and holding ``what``.

    Unreadable, not UTF-8, not TOML, or nested too deeply for tomllib (it recurses
    once per nested array or inline table, and no settings file nests at all): each
    is a :class:`ConfigurationError` of one line.
    """
    where = f"{flag} {os.fspath(path)}"
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ConfigurationError(f"{where}: cannot read it: {error.strerror}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigurationError(f"{where}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{where}: not TOML: {error}") from None
    except RecursionError:
        raise ConfigurationError(f"{where}: nested too deeply to be {what}") from None
