"""Large bodies decoded off the loop give exactly what the ordinary decoder gives.

bridge_store/wire/large_bodies.py cuts long base64 strings out of a JSON body and
decodes a checkpoint's blob piece by piece; every body here is compared with
``JsonCodec.decode`` of the same bytes, refusals included.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import os
import random
from typing import Any

import pytest

from bridge_store._generated.sdk.v1.sdk_store_callback_service_pb2 import CallStoreRequest
from bridge_store.errors import ConnectError
from bridge_store.rpc import contract
from bridge_store.wire import large_bodies
from bridge_store.wire._codecs import CODECS, LARGE_BODY_BYTES

LIMIT = 64 * 1024 * 1024
BLOB = os.urandom(LARGE_BODY_BYTES * 2)
TEXT = base64.b64encode(BLOB).decode("ascii")


def body(substore: str, method: str, data: Any) -> bytes:
    return json.dumps({"substore": substore, "method": method, "input": data}).encode()


def decoded(raw: bytes, encoding: str = "identity", codec: str = "json") -> Any:
    call = large_bodies._decode(CODECS[codec], bytearray(raw), encoding, LIMIT)
    return call.substore, call.method, call.input


def ordinary(raw: bytes) -> Any:
    call = CODECS["json"].decode(bytes(raw))
    return call.substore, call.method, call.input


def test_a_checkpoint_blob_is_decoded_on_the_worker_and_taken_as_it_is() -> None:
    raw = body("checkpoints", "create", {"agentId": "a", "blobId": "b", "data": TEXT})
    _, _, data = decoded(raw)
    assert isinstance(data["data"], large_bodies.DecodedBlob)
    assert contract.take_blob(data, "input") == BLOB
    assert "data" not in data


ALIKE = {
    "agent-text": body("agents", "create", {"agentId": "a", "name": TEXT, "x": [TEXT, 1]}),
    "long-key": body("runs", "create", {TEXT: {"nested": TEXT}}),
    "not-base64-text": body("agents", "create", {"name": "é " * LARGE_BODY_BYTES}),
    "escaped-quote-before-a-run": (
        b'{"substore":"agents","method":"create","input":{"name":"x\\"' + TEXT.encode() + b'"}}'
    ),
    "two-strings": body("agents", "create", {"a": TEXT, "b": TEXT[:100_000]}),
}


@pytest.mark.parametrize("raw", ALIKE.values(), ids=ALIKE.keys())
def test_other_long_strings_are_put_back_exactly(raw: bytes) -> None:
    assert len(raw) > LARGE_BODY_BYTES
    assert decoded(raw) == ordinary(raw)


REFUSED = {
    "unquoted-digits": b'{"input":{"n":' + b"7" * (2 * LARGE_BODY_BYTES) + b"}}",
    "string-then-a-run": b'{"input":["x"' + TEXT.encode() + b'"]}',
    "not-an-object": b"[" + json.dumps(TEXT).encode() + b"]",
    "truncated": body("checkpoints", "create", {"data": TEXT})[:-3],
}


@pytest.mark.parametrize("raw", REFUSED.values(), ids=REFUSED.keys())
def test_bodies_the_ordinary_decoder_refuses_are_refused_alike(raw: bytes) -> None:
    with pytest.raises(ConnectError) as expected:
        ordinary(raw)
    with pytest.raises(ConnectError) as got:
        decoded(raw)
    assert got.value.code == expected.value.code


@pytest.mark.parametrize(
    "text",
    [
        TEXT[:-4] + "QQ==",  # padding only at the end: valid
        TEXT[:200_000] + "QQ==" + TEXT[200_004:],  # padding inside: refused
        TEXT[:-1],  # a length that is no multiple of 4: refused
        TEXT[:300_000] + "-" + TEXT[300_001:],  # not the alphabet (cuts the run): refused
    ],
)
def test_a_blob_decoded_in_pieces_is_checked_as_strictly_as_a_whole(text: str) -> None:
    raw = body("checkpoints", "update", {"agentId": "a", "blobId": "b", "data": text})
    try:
        expected: bytes | str = contract.take_blob(dict(ordinary(raw)[2]), "input")
    except ConnectError as error:
        expected = error.message
    data = decoded(raw)[2]
    try:
        got: bytes | str = contract.take_blob(data, "input")
    except ConnectError as error:
        got = error.message
    assert got == expected


def test_a_large_gzip_body_is_inflated_on_the_worker() -> None:
    raw = body("checkpoints", "create", {"agentId": "a", "blobId": "b", "data": TEXT})
    packed = gzip.compress(raw)
    assert large_bodies.is_large(len(packed), "gzip")
    data = decoded(packed, "gzip")[2]
    assert contract.take_blob(data, "input") == BLOB


def test_a_large_proto_body_gets_its_blob_decoded_too() -> None:
    request = CallStoreRequest(substore="checkpoints", method="create")
    request.input.update({"agentId": "a", "blobId": "b", "data": TEXT})
    data = decoded(request.SerializeToString(), codec="proto")[2]
    assert isinstance(data["data"], large_bodies.DecodedBlob)
    assert contract.take_blob(data, "input") == BLOB


def test_a_string_that_looks_like_a_placeholder_stays_itself() -> None:
    planted = "bridge-store-" + "0" * 32 + "-0"
    raw = body("agents", "create", {"name": planted, "big": TEXT})
    assert decoded(raw) == ordinary(raw)


def outcome(decode: Any) -> Any:
    """What a decode gives, a checkpoint's blob taken: a value, or an error's code."""
    try:
        call = decode()
    except ConnectError as error:
        return ("refused", error.code)
    data = call.input
    if call.substore == "checkpoints" and isinstance(data, dict) and "data" in data:
        data = dict(data)
        try:
            data["data"] = contract.take_blob(dict(data), "input")
        except ConnectError as error:
            data["data"] = ("refused", error.code)
    return (call.substore, call.method, data)


def test_mutated_bodies_decode_as_the_ordinary_decoder_decodes_them() -> None:
    """Quotes, backslashes, brackets and padding dropped, changed or added at random in
    a checkpoint body with long strings as values and keys: 200 bodies, same outcome."""
    rng = random.Random(21)
    text = TEXT[:1_200_000]
    data = {"agentId": "a", "blobId": "b", "data": text, "x": [text[:70_000], {text[:80_000]: 1}]}
    base = body("checkpoints", "create", data)
    for _ in range(200):
        mutated = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(mutated))
            byte = rng.choice(b'"\\{}[],:= \n\x00A/+e1-')
            change = rng.random()
            if change < 0.4:
                mutated[position] = byte
            elif change < 0.7:
                mutated.insert(position, byte)
            else:
                del mutated[position]
        raw = bytes(mutated)
        ordinary_decode = functools.partial(CODECS["json"].decode, raw)
        large_decode = functools.partial(
            large_bodies._decode, CODECS["json"], bytearray(raw), "identity", LIMIT
        )
        assert outcome(ordinary_decode) == outcome(large_decode)
