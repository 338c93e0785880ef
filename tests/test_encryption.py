"""Encryption at rest: seals, keys, key files, and what a wrong key gets."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bridge_store.errors import Code, ConfigurationError, ConnectError
from bridge_store.security.encryption import (
    MAGIC,
    TEXT_MAGIC,
    Identity,
    Keyring,
    is_sealed_blob,
    key_id,
    load_keyring,
    parse_key,
)

KEY_A, KEY_B = os.urandom(32), os.urandom(32)
BLOB = Identity("team-a", "agent-1", "blob-1")
AGENT = Identity("team-a", "agent-1")
METADATA = {"blobEncryptionKey": "planted-secret-0123456789", "n": [1, 2.5, None]}


def test_blobs_round_trip_and_carry_magic_version_and_key_id() -> None:
    ring = Keyring([KEY_A])
    sealed = ring.seal_blob(b"conversation state", BLOB)
    assert sealed.startswith(MAGIC + bytes([1]) + key_id(KEY_A))
    assert b"conversation state" not in sealed
    assert ring.open_blob(sealed, BLOB) == b"conversation state"
    assert ring.seal_blob(b"conversation state", BLOB) != sealed  # a fresh nonce each time
    assert ring.open_blob(ring.seal_blob(b"", BLOB), BLOB) == b""


def test_metadata_round_trips_as_a_sealed_string() -> None:
    ring = Keyring([KEY_A])
    sealed = ring.seal_metadata(METADATA, AGENT)
    assert sealed.startswith(f"{TEXT_MAGIC}{key_id(KEY_A).hex()}:")
    assert "planted-secret" not in sealed
    assert ring.open_metadata(sealed, AGENT) == METADATA


def test_items_stored_before_a_key_was_set_read_as_they_are() -> None:
    ring = Keyring([KEY_A])
    assert ring.open_blob(b"plain bytes", BLOB) == b"plain bytes"
    assert ring.open_metadata(METADATA, AGENT) == METADATA
    assert not is_sealed_blob(MAGIC[:-1])


def test_the_first_key_seals_and_every_key_opens() -> None:
    old = Keyring([KEY_A]).seal_blob(b"x", BLOB)
    ring = Keyring([KEY_B, KEY_A])
    assert ring.open_blob(old, BLOB) == b"x"
    assert not ring.blob_is_current(old)
    assert ring.blob_is_current(ring.seal_blob(b"x", BLOB))
    assert ring.ids == [key_id(KEY_B).hex(), key_id(KEY_A).hex()]


def expect_failed_precondition(action: object, *needles: str) -> None:
    assert callable(action)
    with pytest.raises(ConnectError) as raised:
        action()
    assert raised.value.code == Code.FAILED_PRECONDITION
    for needle in needles:
        assert needle in raised.value.message


def test_a_missing_key_is_failed_precondition_naming_its_id() -> None:
    sealed = Keyring([KEY_A]).seal_blob(b"x", BLOB)
    metadata = Keyring([KEY_A]).seal_metadata(METADATA, AGENT)
    other = Keyring([KEY_B])
    expect_failed_precondition(lambda: other.open_blob(sealed, BLOB), key_id(KEY_A).hex())
    expect_failed_precondition(lambda: other.open_metadata(metadata, AGENT), key_id(KEY_A).hex())


def test_a_wrong_key_with_the_same_id_is_refused_not_garbage() -> None:
    sealed = bytearray(Keyring([KEY_A]).seal_blob(b"secret", BLOB))
    sealed[-1] ^= 1  # altered in storage
    expect_failed_precondition(
        lambda: Keyring([KEY_A]).open_blob(bytes(sealed), BLOB), "does not decrypt", "altered"
    )


@pytest.mark.parametrize(
    "elsewhere",
    [
        Identity("team-b", "agent-1", "blob-1"),
        Identity("team-a", "agent-2", "blob-1"),
        Identity("team-a", "agent-1", "blob-2"),
    ],
)
def test_a_blob_moved_to_another_item_or_tenant_does_not_open(elsewhere: Identity) -> None:
    ring = Keyring([KEY_A])
    sealed = ring.seal_blob(b"secret", BLOB)
    expect_failed_precondition(lambda: ring.open_blob(sealed, elsewhere), "moved")


def test_metadata_moved_to_another_agent_does_not_open() -> None:
    ring = Keyring([KEY_A])
    sealed = ring.seal_metadata(METADATA, AGENT)
    expect_failed_precondition(lambda: ring.open_metadata(sealed, Identity("team-a", "agent-2")))
    expect_failed_precondition(lambda: ring.open_metadata(sealed, Identity("default", "agent-1")))
    expect_failed_precondition(lambda: ring.open_metadata(TEXT_MAGIC + "zz:!!", AGENT), "damaged")


def test_a_blob_with_a_rewritten_key_id_does_not_open() -> None:
    sealed = Keyring([KEY_A]).seal_blob(b"secret", BLOB)
    ring = Keyring([KEY_B, KEY_A])
    start = len(MAGIC) + 1
    swapped = sealed[:start] + key_id(KEY_B) + sealed[start + 8 :]
    expect_failed_precondition(lambda: ring.open_blob(swapped, BLOB), key_id(KEY_B).hex())


def test_key_files_take_hex_and_base64_and_comments(tmp_path: Path) -> None:
    import base64

    path = tmp_path / "keys"
    path.write_text(
        f"# rotated 2026\n{KEY_B.hex()}  # current\n\n{base64.b64encode(KEY_A).decode()}\n"
    )
    ring = load_keyring(path)
    assert ring.current_id == key_id(KEY_B)
    assert ring.ids == [key_id(KEY_B).hex(), key_id(KEY_A).hex()]


@pytest.mark.parametrize("content", ["", "# nothing\n", "abcd\n", "00" * 31 + "\n"])
def test_bad_key_files_are_named_without_showing_a_key(tmp_path: Path, content: str) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match="keys") as raised:
        load_keyring(path)
    if content.strip() and not content.startswith("#"):
        assert "line 1" in str(raised.value)
        assert content.strip() not in str(raised.value)


def test_parse_key_wants_256_bits() -> None:
    assert parse_key(KEY_A.hex()) == KEY_A
    import base64

    with pytest.raises(ValueError, match="128 bits"):
        parse_key(base64.b64encode(os.urandom(16)).decode())
    with pytest.raises(ValueError, match="not hex or base64"):
        parse_key("z" * 64)


def test_keys_generate_puts_a_new_key_first_in_a_private_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bridge_store.cli import main

    path = tmp_path / "keys"
    assert main(["keys", "generate", "--encryption-key-file", str(path)]) == 0
    first = load_keyring(path).current_id.hex()
    assert first in capsys.readouterr().out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert main(["keys", "generate", "--encryption-key-file", str(path)]) == 0
    ring = load_keyring(path)
    assert ring.ids[1] == first
    assert ring.current_id.hex() != first
    key_lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert all(line.split()[0] not in capsys.readouterr().out for line in key_lines)


def test_a_key_file_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys"
    path.write_text(KEY_A.hex() + "\n")
    path.chmod(0o600)
    load_keyring(path)
    assert not caplog.records
    path.chmod(0o644)
    load_keyring(path)
    [record] = caplog.records
    assert "readable by other users: chmod 600" in record.getMessage()
    assert KEY_A.hex() not in caplog.text
