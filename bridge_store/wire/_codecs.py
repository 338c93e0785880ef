"""The two Connect codecs of CallStore: JSON and binary protobuf.

Both decode a request into plain JSON values (dicts, lists, str, int, float, bool,
None) so the contract layer never sees protobuf types, and both reject what JSON
cannot carry (NaN, infinities) or what the stores could not process safely (very deep
nesting) with ``invalid_argument``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple, Protocol

import orjson
from google.protobuf import struct_pb2
from google.protobuf.message import DecodeError

from .._generated.sdk.v1.sdk_store_callback_service_pb2 import (
    CallStoreRequest,
    CallStoreResponse,
)
from ..errors import invalid_argument
from ..types import Document
from . import jsontext

#: Deepest nesting of objects and arrays accepted in ``input``. Backends copy and
#: serialise documents recursively; this keeps every one of them far from Python's
#: recursion limit, and is far deeper than any document the bridge writes. (The binary
#: codec stops earlier: protobuf's own parser caps message nesting at 100, about 33
#: levels of Struct.)
MAX_DEPTH = 128
#: The largest integer every double up to it represents exactly.
_MAX_EXACT_INTEGER = 2**53


class CallStoreCall(NamedTuple):
    """A decoded request; fields keep the client's types for the contract layer to check.

    A NamedTuple: one is made per call, at a third of a frozen dataclass's cost.
    """

    substore: Any
    method: Any
    input: Any


#: Bodies above this size are decoded with an eye on memory rather than speed.
LARGE_BODY_BYTES = 1024 * 1024


class Codec(Protocol):
    """A Connect codec. ``decode`` may clear a ``bytearray`` body it no longer needs."""

    name: str
    #: The ``Content-Type`` of responses in this codec.
    media_type: str

    def decode(self, body: bytes | bytearray) -> CallStoreCall: ...

    def encode(self, output: Document | None) -> bytes: ...


def check_depth(value: Any) -> None:
    """Raise invalid_argument if containers nest deeper than ``MAX_DEPTH``.

    Iterative on purpose: a recursive walk would hit the recursion limit it guards.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= MAX_DEPTH:
            raise invalid_argument(f"input nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


#: Up to this size a body's brackets are counted before its input is walked.
_BRACKET_COUNT_MAX_BYTES = 64 * 1024


def _brackets(body: bytes | bytearray) -> int:
    """How many ``{`` and ``[`` the body holds, in strings or not, less the envelope's.

    Input cannot nest deeper than that: a body with at most ``MAX_DEPTH`` of them
    needs no walk through its input (counting is two passes in C, the walk a Python
    loop over every value).
    """
    return body.count(b"{") + body.count(b"[") - 1


def _reject_constant(name: str) -> Any:
    raise invalid_argument(f"invalid JSON number {name}")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # e.g. 1e999 overflows to inf
        raise invalid_argument(f"JSON number {text[:40]} is out of range")
    return number


_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


class JsonCodec:
    """JSON through orjson, with the standard library as the exact fallback.

    orjson parses and prints about four times faster, which matters on a path taken
    for every streamed agent message. What it refuses (lone surrogates, NaN, numbers
    that overflow a double, integers beyond 64 bits on the way out) goes through the
    standard library, whose answer is the reference: the same documents are accepted
    and the same errors given. One difference remains: orjson reads an integer literal
    beyond 64 bits as a double, the value a JavaScript client meant by it. Bodies
    over ``LARGE_BODY_BYTES`` (checkpoints) go to the standard library, which needs
    fewer copies alive at once.
    """

    name = "json"
    media_type = "application/json"

    def decode(self, body: bytes | bytearray) -> CallStoreCall:
        # Counted first: a large body is cleared as it is read.
        walk = len(body) > _BRACKET_COUNT_MAX_BYTES or _brackets(body) > MAX_DEPTH
        if len(body) > LARGE_BODY_BYTES:
            message = self._decode_large(body)
        else:
            try:
                message = orjson.loads(body)
            except orjson.JSONDecodeError:
                message = self._decode_exactly(body)
        if not isinstance(message, dict):
            raise invalid_argument("request body must be a JSON object")
        data = message.get("input")
        if walk:
            check_depth(data)
        # Unknown top-level fields are ignored, as protobuf JSON parsers do by default
        # in Connect servers, so newer clients can add fields.
        return CallStoreCall(message.get("substore", ""), message.get("method", ""), data)

    def _decode_large(self, body: bytes | bytearray) -> Any:
        """A checkpoint body, parsed with as few copies alive at once as possible.

        orjson copies its whole input before parsing, so the body, that copy and the
        parsed base64 string would all be alive at once (4x the blob at peak). The
        standard library parses a str in place: the body becomes a str, the body's
        bytes are freed, and only the str and what is parsed out of it remain.
        """
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid_argument("request body is not valid UTF-8") from None
        if isinstance(body, bytearray):
            body.clear()
        return self._decode_exactly(text)

    @staticmethod
    def _decode_exactly(body: str | bytes | bytearray) -> Any:
        try:
            return _decoder.decode(body if isinstance(body, str) else body.decode("utf-8"))
        except UnicodeDecodeError:
            raise invalid_argument("request body is not valid UTF-8") from None
        except json.JSONDecodeError as error:
            raise invalid_argument(f"request body is not valid JSON: {error}") from None
        except (RecursionError, ValueError):
            # RecursionError: absurd nesting; ValueError: integers over Python's
            # digit limit for int().
            raise invalid_argument("request body is not acceptable JSON") from None

    def encode(self, output: Document | None) -> bytes:
        message = {} if output is None else {"output": output}
        return jsontext.dumps(message, allow_nan=False)


def from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            raise invalid_argument("input holds a non-finite number")
        # Struct carries every number as a double; an integral one within 2**53 was an
        # integer on the client (a timestamp, a seq) and must stay one. Beyond 2**53 a
        # double is no exact integer, and as a Python int it would be stored as one
        # (1e300 as 301 digits) by some backends and read back as a double by others.
        # Negative zero is no integer either: JSON clients send it as -0.0.
        if (
            number.is_integer()
            and abs(number) <= _MAX_EXACT_INTEGER
            and (number != 0 or math.copysign(1.0, number) > 0)
        ):
            return int(number)
        return number
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return [from_value(item) for item in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    if kind == "null_value":
        return None
    raise invalid_argument("input holds a google.protobuf.Value with no kind set")


def from_struct(struct: struct_pb2.Struct) -> Document:
    return {key: from_value(value) for key, value in struct.fields.items()}


# json.loads joins valid surrogate pairs, so any surrogate left in a str is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_well_formed(key): _well_formed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_well_formed(item) for item in value]
    return value


class ProtoCodec:
    name = "proto"
    media_type = "application/proto"

    def decode(self, body: bytes | bytearray) -> CallStoreCall:
        try:
            # upb parses any buffer; the stubs only say bytes, and a copy could be 100 MiB.
            message = CallStoreRequest.FromString(body)  # type: ignore[arg-type]
        except DecodeError:
            raise invalid_argument("request body is not a valid sdk.v1.CallStoreRequest") from None
        if len(body) > LARGE_BODY_BYTES and isinstance(body, bytearray):
            body.clear()  # the parsed message holds its own copy of every string
        data = from_struct(message.input) if message.HasField("input") else None
        return CallStoreCall(message.substore, message.method, data)

    def encode(self, output: Document | None) -> bytes:
        response = CallStoreResponse()
        if output is not None:
            try:
                response.output.update(output)
            except UnicodeEncodeError:
                # Lone surrogates, stored through the JSON codec, have no UTF-8 form;
                # replace them as JavaScript's TextEncoder does on the way to binary.
                response.output.update(_well_formed(output))
        return response.SerializeToString()


CODECS: dict[str, Codec] = {"json": JsonCodec(), "proto": ProtoCodec()}
