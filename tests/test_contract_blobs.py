"""Checkpoint blobs to and from base64, at the edges of the piecewise encoding."""

from __future__ import annotations

import base64
import random

import pytest

from bridge_store import contract
from bridge_store.errors import ConnectError

PIECE = 3 * 1024 * 1024


@pytest.mark.parametrize("size", [0, 1, 2, 3, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE + 2])
def test_base64_pieces_join_into_the_base64_of_the_whole(size: int) -> None:
    data = random.Random(size).randbytes(size)
    assert "".join(contract.base64_pieces(data)) == base64.b64encode(data).decode("ascii")


def test_take_blob_decodes_and_removes_the_text() -> None:
    parent = {"agentId": "a", "data": base64.b64encode(b"\x00blob\xff").decode("ascii")}
    assert contract.take_blob(parent, "input") == b"\x00blob\xff"
    assert parent == {"agentId": "a"}


@pytest.mark.parametrize("text", ["YQ=", "YQ", "Y Q==", "YQ==YQ==", "=YQ=", "é", "YQ==\n", 7])
def test_take_blob_refuses_what_is_not_strict_base64(text: object) -> None:
    parent = {"data": text}
    with pytest.raises(ConnectError) as caught:
        contract.take_blob(parent, "input")
    assert caught.value.code.value == "invalid_argument"
    assert "input.data" in caught.value.message
    assert parent == {"data": text}  # left as it was
