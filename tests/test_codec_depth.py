"""The JSON codec's depth check, whichever way it is reached: counted brackets first for
bodies up to 64 KiB, the walk through the input for bigger ones or many brackets."""

from __future__ import annotations

import json

import pytest

from bridge_store.errors import Code, ConnectError
from bridge_store.wire._codecs import _BRACKET_COUNT_MAX_BYTES, MAX_DEPTH, JsonCodec


def _body(data: object, padding: int = 0) -> bytes:
    message = {"substore": "runs", "method": "get", "input": data, "pad": "x" * padding}
    return json.dumps(message).encode()


def _deep(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("padding", [0, _BRACKET_COUNT_MAX_BYTES + 1])
def test_too_deep_is_refused_in_small_and_large_bodies(padding: int) -> None:
    with pytest.raises(ConnectError) as refused:
        JsonCodec().decode(_body(_deep(MAX_DEPTH + 1), padding))
    assert refused.value.code is Code.INVALID_ARGUMENT
    assert JsonCodec().decode(_body(_deep(MAX_DEPTH), padding)).input == _deep(MAX_DEPTH)


def test_brackets_inside_strings_only_cost_the_walk() -> None:
    shallow = {"text": "{[" * 1000}
    assert JsonCodec().decode(_body(shallow)).input == shallow


def test_a_large_bytearray_body_is_still_checked_after_it_is_cleared() -> None:
    # Bodies over 1 MiB are cleared as they are read: the size is taken before that.
    body = bytearray(_body(_deep(MAX_DEPTH + 1), 2 * 1024 * 1024))
    with pytest.raises(ConnectError):
        JsonCodec().decode(body)
