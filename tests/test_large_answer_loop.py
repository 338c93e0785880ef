"""Large answers: a checkpoint blob goes out piece by piece, off the event loop.

An 80 MiB ``checkpoints.get`` was built whole on the loop (base64, join, JSON: each one
C call keeping the GIL), and a small call meanwhile waited 300-560 ms, up to 1 s with
two readers. Now the blob's text is encoded on a worker a piece at a time and sent as
it comes (bridge_store/wire/large_answers.py). Checked here: the bytes are exactly what
each codec writes for the whole answer (JSON as the codec writes it, protobuf as the
library parses it), over HTTP too; and two readers of 80 MiB blobs never hold the
loop, on memory, SQLite and Postgres (measured as tests/test_large_body_loop.py
measures uploads: the server's own CPU time within the loop's longest gap). The memory
such answers take is ``python -m bench blob-memory``'s to measure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import uvicorn

from bridge_store._generated.sdk.v1.sdk_store_callback_service_pb2 import (
    CallStoreRequest,
    CallStoreResponse,
)
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.wire._codecs import CODECS
from bridge_store.wire.http_limits import DEFAULT_MAX_REQUEST_BYTES
from bridge_store.wire.large_answers import (
    LARGE_ANSWER_BYTES,
    PIECE_BYTES,
    BlobAnswer,
    StreamedReply,
    plain,
)
from testkit.inprocess import running

from .test_large_body_loop import STALL_BOUND_SECONDS, TICK_SECONDS, client, finish

TOKEN = "large-answer-loop-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READERS = 2
GETS_EACH = 3
BLOB_BYTES = 80 * 1024 * 1024


async def collected(reply: StreamedReply) -> tuple[bytes, list[dict[str, object]]]:
    messages: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        messages.append(message)

    await reply.send(send)  # type: ignore[arg-type]
    parts = [m["body"] for m in messages if m["type"] == "http.response.body"]
    assert all(m.get("more_body") for m in messages[1:-1])
    assert not messages[-1].get("more_body")
    return b"".join(parts), messages  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "size",
    [
        LARGE_ANSWER_BYTES + 1,
        PIECE_BYTES * 3,
        PIECE_BYTES * 3 + 1,
        PIECE_BYTES * 3 + 2,
        2_097_152 + 7,  # the text's length crosses a varint byte (2^21) between layers
    ],
)
async def test_a_streamed_answer_is_what_each_codec_writes_for_the_whole(size: int) -> None:
    blob = os.urandom(size)
    text = base64.b64encode(blob).decode("ascii")
    output = {"found": True, "data": BlobAnswer(blob)}
    json_reply = StreamedReply(CODECS["json"], output, BlobAnswer(blob))
    body, messages = await collected(json_reply)
    assert body == CODECS["json"].encode({"found": True, "data": text})
    assert len(json_reply.body) == len(body)
    assert messages[0]["headers"] == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    # Every piece but the framing is at most one piece of text.
    assert max(len(m["body"]) for m in messages[1:]) <= PIECE_BYTES // 3 * 4  # type: ignore[arg-type]
    proto_reply = StreamedReply(CODECS["proto"], output, BlobAnswer(blob))
    body, _ = await collected(proto_reply)
    assert len(proto_reply.body) == len(body)
    expected = CallStoreResponse()
    expected.output.update({"found": True, "data": text})
    assert CallStoreResponse.FromString(body) == expected
    assert len(body) == len(expected.SerializeToString())
    assert plain(output) == {"found": True, "data": text}


def test_a_large_blob_comes_back_whole_over_http_in_either_codec() -> None:
    blob = os.urandom(3 * 1024 * 1024 + 5)
    config = ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN, ui=False)
    with running(create_app(config)) as base:
        url = base + CALL_STORE_PATH
        ref = {"agentId": "a", "blobId": "b"}
        created = httpx.post(
            url,
            json={
                "substore": "checkpoints",
                "method": "create",
                "input": {**ref, "data": base64.b64encode(blob).decode()},
            },
            headers=AUTH,
            timeout=30,
        )
        assert created.status_code == 200, created.text
        got = httpx.post(
            url,
            json={"substore": "checkpoints", "method": "get", "input": ref},
            headers={**AUTH, "Accept-Encoding": "gzip", "X-Request-Id": "big-1"},
            timeout=30,
        )
        assert got.status_code == 200
        assert got.headers["x-request-id"] == "big-1"
        assert "content-encoding" not in got.headers  # blobs are not worth gzip
        assert int(got.headers["content-length"]) == len(got.content)
        assert base64.b64decode(got.json()["output"]["data"]) == blob
        request = CallStoreRequest(substore="checkpoints", method="get")
        request.input.update(ref)
        binary = httpx.post(
            url,
            content=request.SerializeToString(),
            headers={**AUTH, "Content-Type": "application/proto"},
            timeout=30,
        )
        assert binary.status_code == 200
        answer = CallStoreResponse.FromString(binary.content)
        assert base64.b64decode(answer.output.fields["data"].string_value) == blob
        assert answer.output.fields["found"].bool_value


READER = r"""
import json, sys, threading, httpx
url, token, readers, gets = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
headers = {"Authorization": f"Bearer {token}"}
sizes = []
def read(number):
    with httpx.Client(timeout=600) as http:
        for _ in range(gets):
            ref = {"agentId": "a", "blobId": f"b{number}"}
            body = {"substore": "checkpoints", "method": "get", "input": ref}
            with http.stream("POST", url, json=body, headers=headers) as answer:
                size = sum(len(chunk) for chunk in answer.iter_bytes())
            sizes.append((answer.status_code, size))
print("ready", flush=True)
sys.stdin.readline()
threads = [threading.Thread(target=read, args=(number,)) for number in range(readers)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print(json.dumps(sizes), flush=True)
"""

ROOT = Path(__file__).resolve().parent.parent
MEASURE = """
import asyncio, json, sys
from tests.test_large_answer_loop import gets_meanwhile
print(json.dumps(asyncio.run(gets_meanwhile(sys.argv[1]))))
"""


async def gets_meanwhile(
    url: str = "memory://",
) -> tuple[float, float, list[list[int]], dict[str, list[float]]]:
    from .test_large_body_loop import CALLER

    app = create_app(
        ServerConfig(
            routes=Routes.single(url),
            auth_token=TOKEN,
            max_request_bytes=DEFAULT_MAX_REQUEST_BYTES,
            ui=False,
        )
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done(), "uvicorn did not start"
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}{CALL_STORE_PATH}"
    worst = [0.0, 0.0]

    async def tick() -> None:
        last_wall, last_cpu = time.perf_counter(), time.process_time()
        while True:
            await asyncio.sleep(TICK_SECONDS)
            wall, cpu = time.perf_counter(), time.process_time()
            gap = wall - last_wall - TICK_SECONDS
            caused = min(gap, cpu - last_cpu)
            if caused > worst[0]:
                worst[:] = [caused, gap]
            last_wall, last_cpu = wall, cpu

    try:
        async with httpx.AsyncClient(timeout=600) as http:
            for number in range(READERS):
                text = base64.b64encode(os.urandom(BLOB_BYTES)).decode("ascii")
                ref = {"agentId": "a", "blobId": f"b{number}", "data": text}
                body = {"substore": "checkpoints", "method": "create", "input": ref}
                created = await http.post(url, json=body, headers=AUTH)
                assert created.status_code == 200, created.text
                del text, ref, body
        reader = await client(READER, url, TOKEN, str(READERS), str(GETS_EACH))
        caller = await client(CALLER, url, TOKEN)
        ticker = asyncio.create_task(tick())
        sizes = await finish(reader)
        ticker.cancel()
        calls = await finish(caller)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 60)
    assert isinstance(sizes, list)
    assert isinstance(calls, dict)
    return worst[0], worst[1], sizes, calls


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend",
    [
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=pytest.mark.redis),
        pytest.param("s3", marks=pytest.mark.s3),
    ],
)
def test_two_readers_of_80_mib_blobs_never_hold_the_loop(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """SQLite and Postgres read such blobs in pieces too (bridge_store_sql/blob_reads.py),
    and SQLite on threads of their own, so small reads never queue behind them; so do
    Redis (bridge_store_redis/blob_reads.py) and S3 (bridge_store_s3/blob_reads.py)."""
    urls: dict[str, Callable[[], str]] = {
        "memory": lambda: "memory://",
        "sqlite": lambda: f"sqlite:///{tmp_path / 'store.db'}",
        "postgres": lambda: request.getfixturevalue("make_postgres_url")(),
        "redis": lambda: request.getfixturevalue("make_redis_url")(),
        "redis-cluster": lambda: request.getfixturevalue("make_cluster_url")(),
        "s3": lambda: request.getfixturevalue("make_s3_url")(),
    }
    url = urls[backend]()
    # In a process of its own, as serve runs, for the reason test_large_body_loop gives.
    completed = subprocess.run(
        [sys.executable, "-c", MEASURE, url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    caused, gap, sizes, calls = json.loads(completed.stdout.splitlines()[-1])
    text_bytes = (BLOB_BYTES + 2) // 3 * 4
    assert len(sizes) == READERS * GETS_EACH
    assert all(status == 200 and size > text_bytes for status, size in sizes), sizes
    latencies = sorted(calls["latencies"])
    assert latencies
    assert not calls["failures"]
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    assert caused < STALL_BOUND_SECONDS, (
        f"the server held its loop {caused * 1000:.0f} ms (a gap of {gap * 1000:.0f} ms); "
        f"small calls: {len(latencies)}, p99 {p99 * 1000:.0f} ms"
    )
