"""Fuzzing the wire and contract layers on every backend.

The property, for every generated request: the answer is a correct one (200 with a
well-formed output) or a Connect error whose code is not ``internal``/``unknown``, with
that code's HTTP status; and afterwards the store still answers correctly (a fresh
agent goes in, comes back and goes away).

Requests are the recorded bridge traffic (bench/data/bridge-traffic.jsonl) and a few
checkpoint calls, changed by hypothesis: a value anywhere replaced by an arbitrary JSON
value (wrong types in every field), numbers at every boundary, unicode edge cases and
hostile cursors, keys added or removed, then sent as JSON (sometimes gzipped, sometimes
cut or corrupted) or as binary protobuf, under varied headers. The app runs in process
(the real ``create_app``, lifespan included) so thousands of cases take seconds.

Examples are derandomized, so CI runs the same cases every time; run with
``--hypothesis-profile=fuzz-long`` (random examples, 20 times as many; add
``--hypothesis-seed=N`` to repeat a run) to explore further.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge_store._generated.sdk.v1.sdk_store_callback_service_pb2 import (
    CallStoreRequest,
    CallStoreResponse,
)
from bridge_store.errors import Code
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.wire.fields import MAX_SAFE_INTEGER
from tests.support.hostile import EDGE_TEXT, HOSTILE, json_values, numbers, texts
from tests.support.redis import MakeRedisUrl
from tests.support.s3 import MakeS3Url

TOKEN = "fuzz-token-0123456789"
TRAFFIC = Path(__file__).parent.parent / "bench" / "data" / "bridge-traffic.jsonl"
#: Small enough that the fuzzer reaches it; every backend is fuzzed under the same one.
MAX_REQUEST_BYTES = 256 * 1024

FUZZ = settings.get_profile("fuzz")
#: With --hypothesis-profile=fuzz-long: random examples, this many times as many.
LONG_RUN_FACTOR = 20
#: Examples per test and backend: the in-process ones are cheap; network backends pay a
#: round trip per call (and the liveness check makes three more).
EXAMPLES = {"memory": 400, "sqlite": 200, "postgres": 100, "redis": 100, "s3": 50}


def recorded_calls() -> list[dict[str, Any]]:
    calls = [
        {key: line[key] for key in ("substore", "method", "input")}
        for line in map(json.loads, TRAFFIC.read_text().splitlines())
        if "substore" in line
    ]
    blob = {"agentId": "agent-fuzz", "blobId": "blob-fuzz", "data": "aGVsbG8="}
    calls += [
        {"substore": "checkpoints", "method": "create", "input": blob},
        {"substore": "checkpoints", "method": "update", "input": blob},
        {"substore": "checkpoints", "method": "get", "input": {"agentId": "a", "blobId": "b"}},
        {"substore": "checkpoints", "method": "list", "input": {"filter": {"limit": 2}}},
        {"substore": "agents", "method": "list", "input": {"filter": {"cursor": "x", "cwd": "/"}}},
    ]
    return calls


RECORDED = recorded_calls()

# -- values ------------------------------------------------------------------------------


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON value, the value itself included."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(value[head], rest, new)
    return copy


@st.composite
def calls(draw: st.DrawFn) -> Any:
    """A recorded call with one or two changes anywhere in it."""
    call: Any = draw(st.sampled_from(RECORDED))
    for _ in range(draw(st.integers(1, 2))):
        place = draw(st.sampled_from(list(paths(call))))
        change = draw(st.sampled_from(["replace", "replace", "add", "drop"]))
        if change == "replace":
            call = replaced(call, place, draw(json_values))
        elif change == "add":
            key = draw(st.one_of(texts, st.sampled_from(["cursor", "limit", "seq", "offset"])))
            target = _at(call, place)
            if isinstance(target, dict):
                call = replaced(call, place, {**target, key: draw(json_values)})
        elif place and isinstance(_at(call, place[:-1]), dict):
            parent = dict(_at(call, place[:-1]))
            del parent[place[-1]]
            call = replaced(call, place[:-1], parent)
    return call


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


# -- requests ----------------------------------------------------------------------------


def proto_body(call: Any) -> bytes | None:
    """The call as CallStoreRequest bytes, or None if protobuf cannot carry it."""
    if not isinstance(call, dict):
        return None
    substore, method = call.get("substore", ""), call.get("method", "")
    if not isinstance(substore, str) or not isinstance(method, str):
        return None
    request = CallStoreRequest(substore=substore, method=method)
    data = call.get("input")
    try:
        substore.encode()
        method.encode()
        if isinstance(data, dict):
            request.input.update(data)
        elif data is not None:
            return None
        return request.SerializeToString()
    except (ValueError, TypeError, UnicodeEncodeError):
        return None


@st.composite
def requests(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], bytes]:
    call = draw(calls())
    encoding = draw(st.sampled_from(["json", "json", "json", "proto", "gzip", "mangled"]))
    content_type = b"application/json"
    extra: list[tuple[bytes, bytes]] = []
    body = json.dumps(call).encode()  # ensure_ascii: lone surrogates travel escaped
    if encoding == "proto":
        as_proto = proto_body(call)
        if as_proto is not None:
            body, content_type = as_proto, b"application/proto"
    elif encoding == "gzip":
        body = gzip.compress(body)
        extra.append((b"content-encoding", b"gzip"))
    elif encoding == "mangled":
        body = draw(mangled(body))
    headers = [
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"content-type", draw(st.sampled_from([content_type] * 6 + MEDIA_TYPES))),
        *extra,
    ]
    timeout = draw(st.sampled_from([None, None, None, b"60000", b"abc", b"-1", b"1" * 11]))
    if timeout is not None:
        headers.append((b"connect-timeout-ms", timeout))
    version = draw(st.sampled_from([None, None, b"1", b"2"]))
    if version is not None:
        headers.append((b"connect-protocol-version", version))
    if draw(st.booleans()):
        headers.append((b"content-length", str(len(body)).encode()))
    return headers, body


MEDIA_TYPES = [
    b"application/json; charset=utf-8",
    b"application/json; charset=latin-1",
    b"application/proto",
    b"text/plain",
    b"",
]


@st.composite
def mangled(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` cut short, with bytes flipped, or with bytes inserted."""
    how = draw(st.sampled_from(["cut", "flip", "insert", "garbage"]))
    if how == "garbage":
        return draw(st.binary(max_size=64))
    position = draw(st.integers(0, len(body)))
    if how == "cut":
        return body[:position]
    if how == "insert":
        return body[:position] + draw(st.binary(min_size=1, max_size=8)) + body[position:]
    if not body:
        return body
    position = min(position, len(body) - 1)
    return (
        body[:position] + bytes([body[position] ^ draw(st.integers(1, 255))]) + body[position + 1 :]
    )


# -- the app in process ------------------------------------------------------------------


class InProcessStore:
    """The real app, lifespan and all, driven by ASGI messages on one event loop."""

    def __init__(self, url: str) -> None:
        self.app = create_app(
            ServerConfig(
                routes=Routes.single(url), auth_token=TOKEN, max_request_bytes=MAX_REQUEST_BYTES
            )
        )
        self.runner = asyncio.Runner()
        self._to_app: asyncio.Queue[dict[str, Any]] | None = None
        self._from_app: asyncio.Queue[dict[str, Any]] | None = None
        self._lifespan: asyncio.Task[None] | None = None
        self.runner.run(self._start())
        self._ids = itertools.count()
        self.long_run = False

    async def _start(self) -> None:
        self._to_app, self._from_app = asyncio.Queue(), asyncio.Queue()
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self._lifespan = asyncio.create_task(
            self.app(scope, self._to_app.get, self._from_app.put)  # type: ignore[arg-type]
        )
        await self._to_app.put({"type": "lifespan.startup"})
        message = await self._from_app.get()
        assert message["type"] == "lifespan.startup.complete", message

    def close(self) -> None:
        async def stop() -> None:
            assert self._to_app is not None
            assert self._from_app is not None
            assert self._lifespan is not None
            await self._to_app.put({"type": "lifespan.shutdown"})
            await self._from_app.get()
            await self._lifespan

        try:
            self.runner.run(stop())
        finally:
            self.runner.close()

    def post(
        self, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        return self.runner.run(self._post(headers, body))

    async def _post(
        self, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": CALL_STORE_PATH,
            "raw_path": CALL_STORE_PATH.encode(),
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
        }
        # The body arrives in two pieces, as from a socket.
        middle = len(body) // 2
        pieces = [
            {"type": "http.request", "body": body[:middle], "more_body": True},
            {"type": "http.request", "body": body[middle:], "more_body": False},
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return pieces.pop(0) if pieces else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, receive, send)  # type: ignore[arg-type]
        start, *rest = sent
        assert start["type"] == "http.response.start"
        answer = b"".join(message.get("body", b"") for message in rest)
        return start["status"], dict(start["headers"]), answer

    def call(self, substore: str, method: str, data: Any) -> Any:
        headers = [
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
        ]
        body = json.dumps({"substore": substore, "method": method, "input": data}).encode()
        status, _, answer = self.post(headers, body)
        assert status == 200, (substore, method, answer)
        return json.loads(answer).get("output")

    def check_still_answers(self) -> None:
        """A fresh agent goes in, comes back unchanged, and goes away."""
        agent_id = f"alive-{next(self._ids)}"
        doc = {"agentId": agent_id, "cwd": "/alive", "updatedAt": 1, "sdkMetadata": {"k": "v"}}
        assert self.call("agents", "create", {"agent": doc}) == doc
        assert self.call("agents", "get", {"agentId": agent_id}) == doc
        self.call("agents", "delete", {"filter": {"agentIds": [agent_id]}})
        assert self.call("agents", "get", {"agentId": agent_id}) is None


def check_answer(status: int, headers: dict[bytes, bytes], body: bytes) -> None:
    """A correct answer, or a Connect error that is the client's, never the server's."""
    content_type = headers.get(b"content-type", b"")
    if status == 200:
        if content_type == b"application/proto":
            CallStoreResponse.FromString(body)
        else:
            message = json.loads(body)
            assert set(message) <= {"output"}
        return
    if status == 415:  # the protocol's answer to an unknown codec: plain HTTP
        assert headers[b"accept-post"] == b"application/json, application/proto"
        return
    assert content_type == b"application/json", (status, body[:200])
    error = json.loads(body)
    code = Code(error["code"])
    assert code not in (Code.INTERNAL, Code.UNKNOWN), error
    assert status == code.http_status, (status, error)
    assert isinstance(error["message"], str)


# -- the stores --------------------------------------------------------------------------

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("s3", id="s3", marks=pytest.mark.s3),
]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, InProcessStore]]:
    backend: str = request.param
    url_of: dict[str, Callable[[], str]] = {
        "memory": lambda: "memory://",
        "sqlite": lambda: f"sqlite:///{tmp_path / 'fuzz.db'}",
        "postgres": lambda: request.getfixturevalue("make_postgres_url")(),
        "redis": lambda: _redis_url(request),
        "s3": lambda: _s3_url(request),
    }
    server = InProcessStore(url_of[backend]())
    server.long_run = request.config.getoption("hypothesis_profile", None) == "fuzz-long"
    try:
        yield backend, server
    finally:
        server.close()


def _redis_url(request: pytest.FixtureRequest) -> str:
    make: MakeRedisUrl = request.getfixturevalue("make_redis_url")
    return make()


def _s3_url(request: pytest.FixtureRequest) -> str:
    make: MakeS3Url = request.getfixturevalue("make_s3_url")
    return make()


def fuzz(store: tuple[str, InProcessStore], strategy: st.SearchStrategy[Any], check: Any) -> None:
    backend, server = store
    if server.long_run:
        chosen = settings(
            settings.get_profile("fuzz-long"), max_examples=EXAMPLES[backend] * LONG_RUN_FACTOR
        )
    else:
        chosen = settings(FUZZ, max_examples=EXAMPLES[backend])

    @chosen
    @given(strategy)
    def run(case: Any) -> None:
        check(server, case)
        server.check_still_answers()

    run()


def test_mutated_requests_get_correct_answers_or_client_errors(
    store: tuple[str, InProcessStore],
) -> None:
    def check(server: InProcessStore, request: tuple[list[tuple[bytes, bytes]], bytes]) -> None:
        check_answer(*server.post(*request))

    fuzz(store, requests(), check)


def test_hostile_list_filters_get_correct_answers_or_client_errors(
    store: tuple[str, InProcessStore],
) -> None:
    # Every list with a filter built from hostile parts: cursors, boundary limits and
    # offsets, ids and cwds at and past their limits.
    filters = st.fixed_dictionaries(
        {},
        optional={
            "cursor": st.one_of(
                st.sampled_from(HOSTILE), st.sampled_from(EDGE_TEXT), st.text(), json_values
            ),
            "limit": st.one_of(numbers, json_values),
            "cwd": st.one_of(texts, json_values),
            "agentIds": st.one_of(st.lists(texts, max_size=3), json_values),
            "runIds": st.one_of(st.lists(texts, max_size=3), json_values),
            "blobIds": st.one_of(st.lists(texts, max_size=3), json_values),
        },
    )
    lists = st.one_of(
        st.tuples(st.sampled_from(["agents", "runs", "checkpoints"]), filters).map(
            lambda pair: (pair[0], {"filter": pair[1]})
        ),
        st.fixed_dictionaries(
            {"runId": texts},
            optional={"afterOffset": st.one_of(numbers, texts), "limit": numbers},
        ).map(lambda data: ("runEvents", data)),
    )

    def check(server: InProcessStore, case: tuple[str, dict[str, Any]]) -> None:
        substore, data = case
        body = json.dumps({"substore": substore, "method": "list", "input": data}).encode()
        headers = [
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
        ]
        status, answer_headers, answer = server.post(headers, body)
        check_answer(status, answer_headers, answer)
        if status == 200:
            output = json.loads(answer)["output"]
            assert isinstance(output["items"], list)

    fuzz(store, lists, check)


def test_numbers_survive_both_codecs_exactly_on_every_store(
    store: tuple[str, InProcessStore],
) -> None:
    # A document field holding a number comes back as the same number, sign included:
    # from JSON as given (integers within 64 bits stay integers), from the binary codec,
    # which carries doubles, as an integer when integral (but -0.0, which no integer is).
    counter = itertools.count()

    def check(server: InProcessStore, case: tuple[int | float, str]) -> None:
        number, codec = case
        agent_id = f"num-{next(counter)}"
        doc = {"agentId": agent_id, "cwd": "/n", "updatedAt": 1, "value": number}
        expected: int | float = number
        if codec == "proto":
            negative_zero = number == 0 and math.copysign(1.0, number) < 0
            expected = float(number)
            if expected.is_integer() and abs(expected) <= MAX_SAFE_INTEGER and not negative_zero:
                expected = int(expected)
            body = proto_body({"substore": "agents", "method": "create", "input": {"agent": doc}})
            assert body is not None
            headers = [
                (b"authorization", f"Bearer {TOKEN}".encode()),
                (b"content-type", b"application/proto"),
            ]
            status, _, answer = server.post(headers, body)
            assert status == 200, answer
        else:
            assert server.call("agents", "create", {"agent": doc}) == doc
        stored = server.call("agents", "get", {"agentId": agent_id})["value"]
        assert stored == expected
        assert type(stored) is type(expected)
        assert math.copysign(1.0, stored) == math.copysign(1.0, expected)
        server.call("agents", "delete", {"filter": {"agentIds": [agent_id]}})

    json_numbers = numbers.filter(lambda n: not isinstance(n, int) or -(2**63) <= n < 2**64)
    proto_numbers = numbers.filter(lambda n: isinstance(n, float) or abs(n) <= MAX_SAFE_INTEGER)
    cases = st.one_of(
        st.tuples(json_numbers, st.just("json")), st.tuples(proto_numbers, st.just("proto"))
    )
    fuzz(store, cases, check)


def test_recorded_traffic_replays_cleanly(store: tuple[str, InProcessStore]) -> None:
    # The unmutated traffic is the baseline the mutations start from: every call of it
    # answers as recorded or with the error the recording ran into.
    _, server = store
    for call in RECORDED:
        body = json.dumps(call).encode()
        headers = [
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
        ]
        check_answer(*server.post(headers, body))
    server.check_still_answers()
