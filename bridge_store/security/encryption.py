"""Encryption at rest: AES-256-GCM over sdkMetadata and checkpoint blobs.

The server seals these before any backend sees them and opens them on the way out
(:mod:`bridge_store.security.sealed_stores`), so every backend stores ciphertext alike. Sealed
forms carry a format version and the id of the key that sealed them, so keys rotate:
a key file lists several keys, the first seals, all open. Items stored before a key
was set have no seal and are returned as they are (``keys rotate`` seals them).

Each seal authenticates, besides the bytes, the header (magic, version, key id) and
the item's identity (tenant, agentId, blobId): a sealed value copied onto another
item, another tenant or under another key id does not open. A value that does not
open is ``failed_precondition`` naming the key id, never garbage.

Blob seal: ``MAGIC`` (16 bytes) ``VERSION`` (1) key id (8) nonce (12) ciphertext+tag.
sdkMetadata seal: the JSON string ``"bridge-store-sealed:v1:<key id hex>:<base64 of
nonce+ciphertext+tag>"`` in place of the object.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import Code, ConfigurationError, ConnectError
from ..wire import jsontext
from . import large_seals

#: Starts every sealed blob: a non-ASCII first byte and CR LF / ^Z / LF (as PNG's magic
#: does), so neither text nor any common binary format starts with it by accident.
MAGIC = b"\x89BRSTSEALED\r\n\x1a\n\x00"
VERSION = 1
KEY_ID_BYTES = 8
NONCE_BYTES = 12
KEY_BYTES = 32
_HEADER = len(MAGIC) + 1 + KEY_ID_BYTES
#: Starts every sealed sdkMetadata (a string where a plain one is an object).
TEXT_MAGIC = "bridge-store-sealed:v1:"
logger = logging.getLogger(__name__)

#: Names the key file when ``--encryption-key-file`` is not given.
KEY_FILE_ENV = "BRIDGE_STORE_ENCRYPTION_KEY_FILE"


def key_id(key: bytes) -> bytes:
    """A key's public name: derived from it, so a key file needs no ids of its own."""
    return hashlib.sha256(b"bridge-store key id\x00" + key).digest()[:KEY_ID_BYTES]


def _failed(message: str) -> ConnectError:
    return ConnectError(Code.FAILED_PRECONDITION, message)


@dataclass(frozen=True, slots=True)
class Identity:
    """What a sealed value belongs to; authenticated with it."""

    tenant: str
    agent_id: str
    blob_id: str | None = None  # None: the agent's sdkMetadata

    def associated(self, header: bytes) -> bytes:
        kind = b"sdkMetadata" if self.blob_id is None else b"checkpoint"
        parts = [kind, self.tenant.encode(), self.agent_id.encode("utf-8", "surrogatepass")]
        if self.blob_id is not None:
            parts.append(self.blob_id.encode("utf-8", "surrogatepass"))
        # Lengths first, so no two identities share an encoding.
        return header + b"".join(len(part).to_bytes(4, "big") + part for part in parts)


class Keyring:
    """The keys a server holds: the first seals, every one opens."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a keyring needs at least one key")
        for key in keys:
            if len(key) != KEY_BYTES:
                raise ValueError("keys are 256 bits")
        self._ciphers = {key_id(key): AESGCM(key) for key in keys}
        self._keys = {key_id(key): key for key in keys}
        self.current_id = key_id(keys[0])

    @property
    def ids(self) -> list[str]:
        return [ident.hex() for ident in self._ciphers]

    def _cipher(self, ident: bytes) -> AESGCM:
        cipher = self._ciphers.get(ident)
        if cipher is None:
            raise _failed(
                f"stored item is encrypted with key {ident.hex()}, which this server does not "
                "have: add that key to the encryption key file"
            )
        return cipher

    def _seal(self, plain: bytes, identity: Identity) -> tuple[bytes, bytes]:
        """(header, nonce + ciphertext + tag) under the current key."""
        header = MAGIC + bytes([VERSION]) + self.current_id
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current_id].encrypt(nonce, plain, identity.associated(header))
        return header, nonce + sealed

    def _open(self, header: bytes, body: bytes, identity: Identity) -> bytes:
        ident = header[len(MAGIC) + 1 :]
        if header[len(MAGIC)] != VERSION:
            raise _failed(f"stored item has seal format {header[len(MAGIC)]}, not {VERSION}")
        cipher = self._cipher(ident)
        try:
            return cipher.decrypt(
                body[:NONCE_BYTES], body[NONCE_BYTES:], identity.associated(header)
            )
        except (InvalidTag, ValueError):
            raise _failed(
                f"stored item does not decrypt with key {ident.hex()}: the key differs from "
                "the one that sealed it, or the item was altered or moved"
            ) from None

    # -- blobs ------------------------------------------------------------------------

    def seal_blob(self, data: bytes, identity: Identity) -> bytes:
        if len(data) > large_seals.LARGE_BLOB_BYTES:
            # In pieces, and joined once (a large join lets go of the GIL): the same bytes.
            header = MAGIC + bytes([VERSION]) + self.current_id
            nonce = os.urandom(NONCE_BYTES)
            key = self._keys[self.current_id]
            pieces = large_seals.encrypt(key, nonce, data, identity.associated(header))
            return b"".join([header, nonce, *pieces])
        header, body = self._seal(data, identity)
        return header + body

    def open_blob(self, stored: bytes, identity: Identity) -> bytes:
        if not is_sealed_blob(stored):
            return stored  # stored before a key was set
        if len(stored) > large_seals.LARGE_BLOB_BYTES:
            return self._open_large(stored, identity)
        return self._open(stored[:_HEADER], memoryview(stored)[_HEADER:].tobytes(), identity)

    def _open_large(self, stored: bytes, identity: Identity) -> bytes:
        header = stored[:_HEADER]
        if header[len(MAGIC)] != VERSION:
            raise _failed(f"stored item has seal format {header[len(MAGIC)]}, not {VERSION}")
        ident = header[len(MAGIC) + 1 :]
        self._cipher(ident)  # refuses a key this server does not have
        view = memoryview(stored)
        nonce = bytes(view[_HEADER : _HEADER + NONCE_BYTES])
        try:
            return large_seals.decrypt(
                self._keys[ident], nonce, view[_HEADER + NONCE_BYTES :], identity.associated(header)
            )
        except InvalidTag:
            raise _failed(
                f"stored item does not decrypt with key {ident.hex()}: the key differs from "
                "the one that sealed it, or the item was altered or moved"
            ) from None

    def blob_is_current(self, stored: bytes) -> bool:
        return is_sealed_blob(stored) and stored[len(MAGIC) + 1 : _HEADER] == self.current_id

    # -- sdkMetadata ------------------------------------------------------------------

    def seal_metadata(self, metadata: Any, identity: Identity) -> str:
        header, body = self._seal(jsontext.dumps(metadata), identity)
        ident = header[len(MAGIC) + 1 :].hex()
        return f"{TEXT_MAGIC}{ident}:{base64.b64encode(body).decode('ascii')}"

    def open_metadata(self, stored: Any, identity: Identity) -> Any:
        if not is_sealed_metadata(stored):
            return stored  # stored before a key was set
        ident_hex, _, encoded = stored[len(TEXT_MAGIC) :].partition(":")
        try:
            ident = bytes.fromhex(ident_hex)
            body = base64.b64decode(encoded, validate=True)
        except (ValueError, binascii.Error):
            raise _failed("stored sdkMetadata has a damaged seal") from None
        if len(ident) != KEY_ID_BYTES:
            raise _failed("stored sdkMetadata has a damaged seal")
        header = MAGIC + bytes([VERSION]) + ident
        return jsontext.loads(self._open(header, body, identity))

    def metadata_is_current(self, stored: Any) -> bool:
        return is_sealed_metadata(stored) and stored[len(TEXT_MAGIC) :].startswith(
            self.current_id.hex() + ":"
        )


def is_sealed_blob(stored: bytes) -> bool:
    return len(stored) >= _HEADER and stored.startswith(MAGIC)


def is_sealed_metadata(stored: Any) -> bool:
    return isinstance(stored, str) and stored.startswith(TEXT_MAGIC)


# -- key files --------------------------------------------------------------------------


def parse_key(text: str) -> bytes:
    """A 256-bit key written as 64 hex digits or as base64; ValueError otherwise."""
    try:
        key = (
            bytes.fromhex(text)
            if len(text) == 2 * KEY_BYTES
            else base64.b64decode(text, validate=True)
        )
    except (ValueError, binascii.Error):
        raise ValueError("not hex or base64") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"{len(key) * 8} bits, not 256")
    return key


def load_keyring(path: Path) -> Keyring:
    """The keys of a key file: one per line (hex or base64), the first seals; ``#``
    starts a comment. ConfigurationError naming the line, never showing a key."""
    text = read_key_file_text(path)
    keys: list[bytes] = []
    for number, line in enumerate(text.splitlines(), 1):
        value = line.split("#", 1)[0].strip()
        if not value:
            continue
        try:
            keys.append(parse_key(value))
        except ValueError as error:
            raise ConfigurationError(
                f"{path} line {number}: a key is 32 bytes as 64 hex digits or base64 ({error})"
            ) from None
    if not keys:
        raise ConfigurationError(f"{path} holds no key: run 'bridge-store keys generate'")
    if path.stat().st_mode & 0o077:
        # Served anyway (a start-up refusal would be a worse outage than the warning),
        # but the key file plus a copy of the data is the whole history.
        logger.warning(
            "encryption key file %s is readable by other users: chmod 600 %s", path, path
        )
    return Keyring(keys)


def read_key_file_text(path: Path) -> str:
    """A key file's text; ConfigurationError when it cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigurationError(
            f"cannot read encryption key file {path}: {error.strerror}"
        ) from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(
            f"encryption key file {path} is not UTF-8 text (byte {error.start}): it holds "
            "keys as hex or base64, one per line ('bridge-store keys generate' writes one)"
        ) from None


def new_key_line() -> str:
    key = os.urandom(KEY_BYTES)
    return f"{key.hex()}  # key id {key_id(key).hex()}"
