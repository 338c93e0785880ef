"""Helpers the conformance suite uses to drive a store through the contract layer."""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from typing import Any

import pluggy

from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import Stores
from bridge_store.types import Document
from bridge_store.wire import large_answers
from bridge_store.wire.fields import MAX_KEY_BYTES

#: Text that trips encodings: accents, CJK, an emoji, NUL, a backslash, a quote, a newline.
UNICODE_TEXT = 'héllo wörld ✓ 日本語 🚀 \u0000 \\ " \n'
#: The largest integer a JSON number (a double) holds exactly.
BIG_INT = 2**53
#: Who the suite calls as unless a test says otherwise.
DEFAULT_PRINCIPAL = Principal(name="conformance", tenant=DEFAULT_TENANT, scope=Scope.ADMIN)


def longest_key(seed: int, size: int = MAX_KEY_BYTES) -> str:
    """A key of exactly ``size`` UTF-8 bytes that no database can compress much.

    Random three-byte characters, so that neither Postgres' index compression nor a
    hex encoding (S3) makes it shorter than a real key of that size would be.
    """
    rng = random.Random(seed)
    text = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return text + "k" * (size - len(text.encode()))


@dataclass
class StoreClient:
    """Calls a store the way the server does, with JSON round trips on both sides.

    Calls are made as ``principal``: an admin of tenant ``default`` unless given.
    """

    stores: Stores
    manager: pluggy.PluginManager
    principal: Principal = DEFAULT_PRINCIPAL

    def as_tenant(self, tenant: str, scope: Scope = Scope.ADMIN) -> StoreClient:
        """The same store, called with a token of ``tenant``."""
        principal = Principal(name=f"conformance-{tenant}", tenant=tenant, scope=scope)
        return dataclasses.replace(self, principal=principal)

    async def call(self, substore: str, method: str, data: Any) -> Any:
        # Round-tripping through JSON catches backends that alias caller memory or
        # return values the wire cannot carry.
        output, _ = await call_store(
            self.stores,
            substore,
            method,
            json.loads(json.dumps(data)),
            principal=self.principal,
        )
        # A large blob's answer carries the blob, which the wire writes as its text.
        return json.loads(json.dumps(large_answers.plain(output)))

    async def error(self, substore: str, method: str, data: Any) -> ConnectError:
        """The ConnectError a call raises; fails the test if it succeeds."""
        try:
            result = await self.call(substore, method, data)
        except ConnectError as error:
            return error
        raise AssertionError(f"{substore}.{method} succeeded with {result!r}, expected an error")

    async def expect(self, code: Code, substore: str, method: str, data: Any) -> str:
        error = await self.error(substore, method, data)
        assert error.code == code, f"expected {code.value}, got {error.code.value}: {error.message}"
        return error.message


def agent(agent_id: str, *, updated_at: int = 1000, cwd: str = "/work/a", **extra: Any) -> Document:
    doc: Document = {
        "agentId": agent_id,
        "cwd": cwd,
        "status": "idle",
        "activeRunId": None,
        "name": f"agent {agent_id}",
        "createdAt": 1000,
        "updatedAt": updated_at,
        "sdkMetadata": {"blobEncryptionKey": "00" * 32},
    }
    doc.update(extra)
    return doc


def run(run_id: str, agent_id: str = "agent-1", *, turn_number: int = 1, **extra: Any) -> Document:
    doc: Document = {
        "runId": run_id,
        "requestId": None,
        "agentId": agent_id,
        "turnNumber": turn_number,
        "status": "queued",
        "model": {"id": "composer-2"},
        "result": None,
        "error": None,
        "usageRef": None,
        "usage": None,
        "createdAt": 1000,
        "updatedAt": 1000,
        "startedAt": None,
        "endedAt": None,
        "startCheckpointRef": None,
        "latestCheckpointRef": None,
    }
    doc.update(extra)
    return doc


async def list_all(client: StoreClient, substore: str, filter_: Document) -> list[Any]:
    """Every item of a list, following nextCursor page by page."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(10_000):
        page_filter = dict(filter_)
        if cursor is not None:
            page_filter["cursor"] = cursor
        page = await client.call(substore, "list", {"filter": page_filter})
        items.extend(page["items"])
        cursor = page.get("nextCursor")
        if cursor is None:
            return items
    raise AssertionError("list never ended")


async def list_events(client: StoreClient, run_id: str) -> list[Any]:
    """Every event of a run, following nextOffset."""
    events: list[Any] = []
    offset = "0"
    while True:
        page = await client.call("runEvents", "list", {"runId": run_id, "afterOffset": offset})
        events.extend(page["items"])
        if "nextOffset" not in page:
            return events
        offset = page["nextOffset"]
