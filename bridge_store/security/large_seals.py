"""AES-GCM over large blobs in pieces, so sealing one never holds the GIL for long.

``AESGCM.encrypt`` of a 75 MB checkpoint is one call that keeps the GIL for a few
hundred milliseconds: run on a worker thread it still stops the event loop as long.
The same cipher through ``Cipher(AES, GCM)`` takes the data a piece at a time, and the
GIL can pass to the loop between pieces. The output is the same bytes
(``ciphertext + tag``), so what either path sealed the other opens.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

#: Blobs larger than this are sealed and opened in pieces, on a worker thread.
LARGE_BLOB_BYTES = 1024 * 1024
#: Bytes per call into OpenSSL: about a millisecond.
_PIECE = 1024 * 1024
TAG_BYTES = 16


def encrypt(key: bytes, nonce: bytes, data: bytes, associated: bytes) -> list[bytes]:
    """``AESGCM(key).encrypt(nonce, data, associated)``, in pieces (joined, the same)."""
    encryptor = Cipher(algorithms.AES(key), modes.GCM(nonce)).encryptor()
    encryptor.authenticate_additional_data(associated)
    view = memoryview(data)
    pieces = [
        encryptor.update(view[start : start + _PIECE]) for start in range(0, len(view), _PIECE)
    ]
    pieces.append(encryptor.finalize())
    pieces.append(encryptor.tag)
    return pieces


def decrypt(key: bytes, nonce: bytes, sealed: memoryview, associated: bytes) -> bytes:
    """``AESGCM(key).decrypt(nonce, sealed, associated)``, in pieces; InvalidTag alike."""
    if len(sealed) < TAG_BYTES:
        raise InvalidTag
    body, tag = sealed[:-TAG_BYTES], bytes(sealed[-TAG_BYTES:])
    decryptor = Cipher(algorithms.AES(key), modes.GCM(nonce, tag)).decryptor()
    decryptor.authenticate_additional_data(associated)
    pieces = [
        decryptor.update(body[start : start + _PIECE]) for start in range(0, len(body), _PIECE)
    ]
    pieces.append(decryptor.finalize())  # raises InvalidTag: nothing is returned then
    return b"".join(pieces)
