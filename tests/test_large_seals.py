"""Large blobs are sealed and opened in pieces: the same bytes as AES-GCM in one call.

``AESGCM.encrypt`` of a 75 MB checkpoint kept the GIL for a few hundred milliseconds,
and so the event loop; bridge_store/security/large_seals.py takes it a megabyte at a
time. What either path seals, the other opens, and a tampered or moved blob is refused
alike.
"""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bridge_store.errors import Code, ConnectError
from bridge_store.security import large_seals
from bridge_store.security.encryption import (
    _HEADER,
    MAGIC,
    NONCE_BYTES,
    VERSION,
    Identity,
    Keyring,
    key_id,
)

KEY = os.urandom(32)
OTHER = os.urandom(32)
BLOB = os.urandom(3 * large_seals.LARGE_BLOB_BYTES + 12_345)
WHERE = Identity("team-a", "agent-1", "blob-1")


def one_call_seal(data: bytes, identity: Identity) -> bytes:
    """What the seal of a blob was before pieces: one AESGCM.encrypt."""
    header = MAGIC + bytes([VERSION]) + key_id(KEY)
    nonce = os.urandom(NONCE_BYTES)
    return header + nonce + AESGCM(KEY).encrypt(nonce, data, identity.associated(header))


def test_a_blob_sealed_in_pieces_opens_in_one_call_and_back() -> None:
    ring = Keyring([KEY])
    sealed = ring.seal_blob(BLOB, WHERE)
    header = sealed[:_HEADER]
    nonce = sealed[_HEADER : _HEADER + NONCE_BYTES]
    body = sealed[_HEADER + NONCE_BYTES :]
    assert AESGCM(KEY).decrypt(nonce, body, WHERE.associated(header)) == BLOB
    assert ring.open_blob(one_call_seal(BLOB, WHERE), WHERE) == BLOB
    assert ring.open_blob(sealed, WHERE) == BLOB
    # Rotated: the old key opens, the new one seals.
    assert Keyring([OTHER, KEY]).open_blob(sealed, WHERE) == BLOB


@pytest.mark.parametrize("how", ["flipped byte", "cut tag", "other blob", "unknown key"])
def test_a_tampered_moved_or_foreign_large_blob_is_refused(how: str) -> None:
    ring = Keyring([KEY])
    sealed = bytearray(ring.seal_blob(BLOB, WHERE))
    where = WHERE
    if how == "flipped byte":
        sealed[len(sealed) // 2] ^= 1
    elif how == "cut tag":
        del sealed[-5:]
    elif how == "other blob":
        where = Identity("team-a", "agent-1", "blob-2")
    else:
        ring = Keyring([OTHER])
    with pytest.raises(ConnectError) as refused:
        ring.open_blob(bytes(sealed), where)
    assert refused.value.code is Code.FAILED_PRECONDITION
