"""Each response leaves in one write: uvicorn's head and body writes joined.

:class:`OneWriteResponses` is what :class:`~.http_guard.GuardedHttpToolsProtocol`
gives each request's response cycle as its transport.
"""

from __future__ import annotations

from asyncio import Transport
from typing import Any

#: Bodies up to this size are joined to their head; larger ones follow it separately.
_JOINED_BODY_MAX_BYTES = 64 * 1024


class OneWriteResponses:
    """The transport as one request's response cycle sees it: the response head waits
    for the first body write and leaves with it, in one system call and one TCP segment.

    uvicorn writes the head when the application starts its response and the body when
    it sends it: two writes, two segments, and a client woken twice, for every call.
    Anything written before the response starts (``100 Continue``) goes out at once.
    A HEAD answer gets no body write to wait for, so its cycle is not given one of these.
    """

    __slots__ = ("_cycle", "_head", "_transport")

    def __init__(self, transport: Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        #: The head, until the body comes; None before it and after.
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if len(data) > _JOINED_BODY_MAX_BYTES:
                self._transport.write(head)  # a blob is not copied to save a write
                self._transport.write(data)
            else:
                self._transport.write(head + data)
        elif self._cycle.response_started and not self._cycle.response_complete:
            self._head = data  # the head: the cycle writes it first
            self._cycle = _SENT
        else:
            self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Sent:
    """A cycle whose head has been taken: every later write goes straight out."""

    response_started = False
    response_complete = True


_SENT = _Sent()
