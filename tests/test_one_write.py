"""A response leaves in one write: the head waits for the body (bridge_store.wire.one_write).

uvicorn writes a response's head and body separately: two system calls and two TCP
segments per call, and a client woken twice. serve's protocol joins them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from bridge_store.wire.http_guard import guarded_protocol
from bridge_store.wire.http_limits import HttpLimits
from bridge_store.wire.one_write import _JOINED_BODY_MAX_BYTES


class Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _app(body: bytes) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def _exchange(body: bytes, request: bytes) -> list[bytes]:
    config = uvicorn.Config(
        _app(body), lifespan="off", log_level="warning", http=guarded_protocol(HttpLimits())
    )
    config.load()
    protocol_class: Any = config.http_protocol_class
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={})
    transport = Recording()
    protocol.connection_made(transport)
    protocol.data_received(request)
    for _ in range(100):
        if transport.writes and b"".join(transport.writes).endswith(body):
            break
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return transport.writes


POST = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


async def test_a_small_response_is_one_write() -> None:
    writes = await _exchange(b'{"output":{}}', POST)
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b'\r\n\r\n{"output":{}}')


async def test_a_blob_is_not_copied_to_join_its_head() -> None:
    body = b"x" * (_JOINED_BODY_MAX_BYTES + 1)
    writes = await _exchange(body, POST)
    assert [len(w) for w in writes][1:] == [len(body)]
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b"\r\n\r\n")


async def test_100_continue_is_not_held_back() -> None:
    request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
    writes = await _exchange(b"done", request + b"{}")
    assert writes[0] == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert len(writes) == 2
    assert writes[1].endswith(b"\r\n\r\ndone")


async def test_a_head_answer_leaves_without_a_body_write_to_wait_for() -> None:
    """uvicorn writes no body for HEAD: the head must not wait for one."""
    request = b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
    writes = await _exchange(b"", request)
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes[0].endswith(b"content-length: 0\r\n\r\n")
