"""The tokens file: named tokens with tenants and scopes, stored as SHA-256 digests.

::

    [[token]]
    name = "alice-laptop"      # shown in logs and metrics, never the token
    sha256 = "<hex sha256 of the token>"
    tenant = "team-a"
    scope = "write"            # read | write | admin | operator

The token itself is never stored: whoever reads the file learns names, tenants and
scopes, not a credential. ``bridge-store token add`` writes entries; a running server
re-reads the file when it changes (see :class:`bridge_store.security.auth.TokenRegistry`).
"""

from __future__ import annotations

import fcntl
import os
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..backend.tenants import is_valid_tenant
from ..errors import ConfigurationError
from .auth import TOKEN_NAME_PATTERN, Scope, TokenEntry, TokenRegistry, token_digest
from .tokens import new_token, write_private

#: Names the tokens file when ``--tokens-file`` is not given.
TOKENS_FILE_ENV = "BRIDGE_STORE_TOKENS_FILE"
_HEADER = (
    "# bridge-store tokens: written by `bridge-store token add|revoke`.\n"
    "# Each entry holds the SHA-256 of a token, never the token itself.\n"
)
#: How long ``token add``/``revoke`` wait for another one to finish writing the file.
LOCK_WAIT_SECONDS = 10.0
_SCOPES = ", ".join(scope.value for scope in Scope)


def parse_entries(text: str, source: str) -> list[TokenEntry]:
    """The entries of a tokens file's ``text``; ConfigurationError naming the problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{source} is not valid TOML: {error}") from None
    except RecursionError:
        # tomllib recurses once per nested array or inline table; a tokens file has
        # none, so a file this deep is not one.
        raise ConfigurationError(
            f"{source} is not a tokens file: its arrays or tables nest too deeply"
        ) from None
    unknown = set(data) - {"token"}
    if unknown:
        raise ConfigurationError(f"{source}: unknown top-level keys {sorted(unknown)}")
    tables = data.get("token", [])
    if not isinstance(tables, list):
        raise ConfigurationError(f"{source}: 'token' must be an array of tables ([[token]])")
    entries = [_entry(table, f"{source}: token {number}") for number, table in enumerate(tables, 1)]
    _check_unique(entries, source)
    return entries


def _entry(table: Any, where: str) -> TokenEntry:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where} must be a table")
    unknown = set(table) - {"name", "sha256", "tenant", "scope"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown keys {sorted(unknown)}")
    name, digest, tenant, scope = (table.get(key) for key in ("name", "sha256", "tenant", "scope"))
    if not isinstance(name, str) or not TOKEN_NAME_PATTERN.fullmatch(name):
        raise ConfigurationError(
            f"{where}: name must be 1-64 characters of letters, digits and ._@-"
        )
    where = f"{where} ({name})"
    if not isinstance(digest, str) or len(digest) != 64:
        raise ConfigurationError(f"{where}: sha256 must be 64 hex digits")
    try:
        raw = bytes.fromhex(digest)
    except ValueError:
        raise ConfigurationError(f"{where}: sha256 must be 64 hex digits") from None
    if not isinstance(tenant, str) or not is_valid_tenant(tenant):
        raise ConfigurationError(
            f"{where}: tenant must be 1-63 characters of a-z, 0-9, '-' and '_'"
        )
    try:
        parsed_scope = Scope(scope)
    except ValueError:
        raise ConfigurationError(f"{where}: scope must be one of {_SCOPES}") from None
    return TokenEntry(name=name, sha256=raw, tenant=tenant, scope=parsed_scope)


def _check_unique(entries: Sequence[TokenEntry], source: str) -> None:
    names: set[str] = set()
    digests: set[bytes] = set()
    for entry in entries:
        if entry.name in names:
            raise ConfigurationError(f"{source}: two tokens are named {entry.name!r}")
        if entry.sha256 in digests:
            # One token must resolve to one principal.
            raise ConfigurationError(f"{source}: token {entry.name!r} repeats another's sha256")
        names.add(entry.name)
        digests.add(entry.sha256)


def load_entries(path: Path) -> list[TokenEntry]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(f"cannot read tokens file {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"tokens file {path} is not UTF-8 text (byte {error.start}); "
            "'bridge-store token add' writes one"
        ) from None
    return parse_entries(text, str(path))


def open_registry(path: Path) -> TokenRegistry:
    """A registry of the tokens in ``path`` that follows the file's changes."""
    return TokenRegistry(load_entries(path), path=path, loader=load_entries)


def render(entries: Sequence[TokenEntry]) -> str:
    """The file for ``entries``. Names and tenants are checked, so need no escaping."""
    blocks = [
        f'[[token]]\nname = "{entry.name}"\nsha256 = "{entry.sha256.hex()}"\n'
        f'tenant = "{entry.tenant}"\nscope = "{entry.scope.value}"\n'
        for entry in entries
    ]
    return _HEADER + "".join("\n" + block for block in blocks)


def lock_path(path: Path) -> Path:
    """The file that ``token add``/``revoke`` lock while they rewrite ``path``.

    A sidecar, not the tokens file: the write replaces the tokens file, and a lock on
    the replaced file would protect nothing. It holds no data and is never removed
    (removing it would let two writers lock two different files).
    """
    return path.with_name(f".{path.name}.lock")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (waits at most LOCK_WAIT_SECONDS)."""
    lock = lock_path(path)
    for parent in (path.parent, *path.parent.parents):
        if parent.exists() and not parent.is_dir():
            raise ConfigurationError(
                f"cannot write tokens file {path}: {parent} is a file, not a directory"
            )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        raise ConfigurationError(f"cannot lock tokens file {path}: {error.strerror}") from None
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConfigurationError(
                        f"another 'bridge-store token' command has been writing {path} for "
                        f"{LOCK_WAIT_SECONDS:g} s (it holds {lock}); run this one again once "
                        "it is done"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _existing(path: Path) -> list[TokenEntry]:
    return load_entries(path) if path.exists() else []


def add_token(path: Path, name: str, *, tenant: str, scope: Scope) -> str:
    """Append a new random token's entry to ``path`` (created 0600); the token.

    Read, changed and written back under the file's lock, so a concurrent add or
    revoke is never lost; the token is returned only once it is in the file.
    """
    token = new_token()
    entry = TokenEntry(name=name, sha256=token_digest(token), tenant=tenant, scope=scope)
    with _locked(path):
        entries = _existing(path)
        # Checked the same way the server will read it back.
        new = parse_entries(render([*entries, entry]), str(path))
        write_private(path, render(new).rstrip("\n"))
    return token


def revoke_token(path: Path, name: str) -> None:
    """Remove ``name``'s entry from ``path``, under the file's lock (see add_token)."""
    with _locked(path):
        entries = _existing(path)
        kept = [entry for entry in entries if entry.name != name]
        if len(kept) == len(entries):
            raise ConfigurationError(f"{path} has no token named {name!r}")
        write_private(path, render(kept).rstrip("\n"))
