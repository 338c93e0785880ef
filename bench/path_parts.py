"""Parts of the CallStore path taken out one at a time, to measure what each one costs.

``bench cpu-per-call --without-each`` measures its first target as ``serve`` builds
it and again with each part of :data:`PARTS` taken out, then with all of them out,
in the same alternating rounds as the ceiling: the differences are what each layer
costs a call, in the same process and the same minute. A part is taken out by
replacing, for that measurement only, the one function or setting that does its
work; everything else on the path stays as served. These are measurements, never
configurations: a server without its observer or its auth is not one to run.

Any target but the ceiling (which has none of these layers) can be measured so; with
``handler`` out every call is answered with an empty output, so what is left is the
HTTP, Connect, auth and observer layers alone, whatever the backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from bridge_store.rpc import connect
from bridge_store.security.auth import Principal, TokenRegistry
from bridge_store.server import app as app_module
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.types import Answer
from bridge_store.workspaces.paths import Checkout

#: Each part, and what its measurement leaves out.
PARTS = {
    "observer": "no request id, metrics, access log or span (the endpoint has no observer)",
    "metrics": "the metrics alone (serve --no-metrics)",
    "auth": "the bearer token is resolved on the first call only, its principal reused",
    "handler": (
        "every call is answered at once with an empty output: no dispatch, contract "
        "checks, store or encoding of an output"
    ),
}
#: The label of the measurement with every part out at once.
ALL = "all"


def label(target: str, without: frozenset[str]) -> str:
    """How a measurement is named in the report: ``memory``, ``memory -auth``..."""
    if not without:
        return target
    return f"{target} -{ALL if without == frozenset(PARTS) else ','.join(sorted(without))}"


def server_config(url: str, token: str, without: frozenset[str]) -> ServerConfig:
    """What ``bridge-store serve --store URL`` builds: metrics, viewer, one token."""
    return ServerConfig(
        routes=Routes.single(url), auth_token=token, metrics="metrics" not in without
    )


#: One measurement of a round: a target, and the parts taken out of its path.
Variant = tuple[str, frozenset[str]]


def each_part_out(target: str) -> list[Variant]:
    """``target`` as served, without each part in turn, then without all of them."""
    parts = [frozenset({part}) for part in PARTS]
    return [
        (target, frozenset()),
        *((target, out) for out in parts),
        (target, frozenset(PARTS)),
    ]


@contextlib.contextmanager
def taken_out(without: frozenset[str]) -> Iterator[None]:
    """While inside, apps built by ``create_app`` lack the code parts of ``without``
    (``metrics`` is a setting: :func:`server_config`)."""
    unknown = without - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; parts are {', '.join(PARTS)}")
    with contextlib.ExitStack() as stack:
        server = app_module.BridgeStoreServer
        if "observer" in without:
            stack.enter_context(mock.patch.object(server, "endpoint", _unobserved))
        if "auth" in without:
            stack.enter_context(mock.patch.object(connect, "bearer_principal", _first_principal()))
        if "handler" in without:
            stack.enter_context(mock.patch.object(server, "handle", _answer_at_once))
        yield


_served_endpoint = app_module.BridgeStoreServer.endpoint


def _unobserved(server: app_module.BridgeStoreServer) -> connect.CallStoreEndpoint:
    endpoint = _served_endpoint(server)
    endpoint._observer = None
    return endpoint


def _first_principal() -> Any:
    resolve = connect.bearer_principal
    known: dict[str, Principal | None] = {}

    def bearer_principal(header: str | bytes | None, tokens: TokenRegistry) -> Principal | None:
        if "principal" not in known:
            known["principal"] = resolve(header, tokens)
        return known["principal"]

    return bearer_principal


async def _answer_at_once(
    server: app_module.BridgeStoreServer,
    principal: Principal,
    substore: Any,
    method: Any,
    data: Any,
    checkout: Checkout | None = None,
) -> Answer:
    return None, False
