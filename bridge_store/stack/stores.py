"""The stores a server serves from: which backend serves which substore, opened together.

:class:`Routes` names one store URL per substore; :func:`resolve` opens one backend
per distinct URL (:class:`ResolvedStores`), and :class:`Stores` holds the substore each
call goes to (possibly from different backends). Starting them gives
:class:`OpenStores`, which closes them; :func:`open_stores` does both steps.

:class:`StoreStack` is how the server, ``bridge-store ui`` and every command open
their stores: resolved once (the one place the installed plugins are asked), started
(migrated or not), then wrapped in the caller's list of layers
(:class:`~bridge_store.stack.layers.StoreLayer`), bottom first. The layers come from above
this layer (``security``, ``ops``, ``run_traces``), so this module imports none of
them. :class:`OpenStack` holds the one view of the stores, what calls go to;
:meth:`Stores.beneath` finds the backends' own substores under the layers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import pluggy

from ..backend.plugins import get_plugin_manager, open_backend
from ..backend.substores import (
    SUBSTORE_NAMES,
    AgentStore,
    Backend,
    BackendOptions,
    CheckpointStore,
    RunEventStore,
    RunStore,
    SubstoreName,
)
from ..errors import BackendUnreachable, ConfigurationError, ConnectError
from ..urls import redact
from .layers import StoreLayer, beneath

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Stores:
    """The implementation serving each substore (possibly from different backends)."""

    agents: AgentStore
    runs: RunStore
    run_events: RunEventStore
    checkpoints: CheckpointStore

    def layered(self, layers: Sequence[StoreLayer]) -> Stores:
        """These stores wrapped in ``layers``, the first closest to the backends."""
        agents, runs, run_events, checkpoints = (
            self.agents,
            self.runs,
            self.run_events,
            self.checkpoints,
        )
        for layer in layers:
            agents = layer.agents(agents)
            runs = layer.runs(runs)
            run_events = layer.run_events(run_events)
            checkpoints = layer.checkpoints(checkpoints)
        return Stores(agents, runs, run_events, checkpoints)

    def beneath(self) -> Stores:
        """The backends' own substores beneath every layer: where their optional
        features are (a search index, a run list), and what reads and deletes that are
        not clients' calls go to (prune, gc, key rotation: no secret opened, nothing
        counted)."""
        return Stores(
            beneath(self.agents),
            beneath(self.runs),
            beneath(self.run_events),
            beneath(self.checkpoints),
        )


@dataclass(frozen=True, slots=True)
class Routes:
    """The store URL of each substore (all the same unless overridden)."""

    agents: str
    runs: str
    run_events: str
    checkpoints: str

    @classmethod
    def single(cls, url: str) -> Routes:
        return cls(agents=url, runs=url, run_events=url, checkpoints=url)

    def urls(self) -> list[str]:
        """Distinct URLs in substore order."""
        return list(dict.fromkeys((self.agents, self.runs, self.run_events, self.checkpoints)))

    def served(self) -> dict[str, tuple[SubstoreName, ...]]:
        """Each distinct URL (in :meth:`urls` order) and the substores routed to it."""
        targets = (self.agents, self.runs, self.run_events, self.checkpoints)
        routed = list(zip(SUBSTORE_NAMES, targets, strict=True))
        return {url: tuple(name for name, to in routed if to == url) for url in self.urls()}


@dataclass(slots=True)
class OpenStores:
    """The started backends behind a set of routes and the substores drawn from them."""

    backends: list[Backend]
    stores: Stores

    async def close(self) -> None:
        for backend in reversed(self.backends):
            await backend.close()


@dataclass(frozen=True, slots=True)
class ResolvedStores:
    """The backends a set of routes names, one per distinct URL, not started yet.

    Resolving finds bad URLs, missing extras and missing substores before anything
    connects; :meth:`start` then starts exactly these backends.
    """

    #: Each distinct URL's backend, in substore order.
    backends: dict[str, Backend]
    stores: Stores

    async def start(self, *, migrate: bool) -> OpenStores:
        """Start every backend; closes those that started when one fails."""
        started: list[Backend] = []
        try:
            for url, backend in self.backends.items():
                try:
                    await backend.start(migrate=migrate)
                except ConnectError as error:
                    # A backend that reports its start's outage as a call would: it did
                    # not answer, and may later.
                    raise BackendUnreachable(
                        f"cannot start the store at {redact(url)}: {error.message}"
                    ) from error
                started.append(backend)
        except BaseException:
            for backend in reversed(started):
                await backend.close()
            raise
        return OpenStores(backends=started, stores=self.stores)


def _provided(substore: T | None, url: str, name: str) -> T:
    if substore is None:
        raise ConfigurationError(
            f"the backend for {redact(url)} does not provide the {name} substore"
        )
    return substore


def resolve(
    manager: pluggy.PluginManager, routes: Routes, options: BackendOptions | None = None
) -> ResolvedStores:
    """Open (without starting) one backend per distinct URL and pick each substore."""
    backends = {url: open_backend(manager, url, options) for url in routes.urls()}
    stores = Stores(
        agents=_provided(backends[routes.agents].agents, routes.agents, "agents"),
        runs=_provided(backends[routes.runs].runs, routes.runs, "runs"),
        run_events=_provided(
            backends[routes.run_events].run_events, routes.run_events, "runEvents"
        ),
        checkpoints=_provided(
            backends[routes.checkpoints].checkpoints, routes.checkpoints, "checkpoints"
        ),
    )
    return ResolvedStores(backends=backends, stores=stores)


async def open_stores(
    manager: pluggy.PluginManager,
    routes: Routes,
    *,
    migrate: bool,
    options: BackendOptions | None = None,
) -> OpenStores:
    """Resolve and start every backend the routes name; closes what started on failure."""
    return await resolve(manager, routes, options).start(migrate=migrate)


@dataclass(frozen=True, slots=True)
class OpenStack:
    """A started :class:`StoreStack`: its backends, and the stores its calls go to."""

    #: Each distinct URL's started backend, in substore order.
    backends: dict[str, Backend]
    #: The backends' substores in the stack's layers: what the calls go to.
    stores: Stores

    async def close(self) -> None:
        for backend in reversed(self.backends.values()):
            await backend.close()


@dataclass(frozen=True, slots=True)
class StoreStack:
    """The stores of a set of routes, resolved, to be started and wrapped in
    ``layers`` (bottom first: sealing closest to the backends, then what counts or
    watches what clients do)."""

    routes: Routes
    resolved: ResolvedStores
    layers: tuple[StoreLayer, ...] = ()

    @classmethod
    def of(
        cls,
        routes: Routes,
        options: BackendOptions | None = None,
        *,
        manager: pluggy.PluginManager | None = None,
        layers: Sequence[StoreLayer] = (),
    ) -> StoreStack:
        """Resolve ``routes`` (a bad URL or a missing extra raises now) with ``manager``
        (default: every installed backend)."""
        manager = manager if manager is not None else get_plugin_manager()
        return cls(routes, resolve(manager, routes, options), tuple(layers))

    @property
    def backends(self) -> dict[str, Backend]:
        """Each distinct URL's backend (started or not), in substore order."""
        return self.resolved.backends

    async def open(self, *, migrate: bool) -> OpenStack:
        """Start every backend (closing those started when one fails), then wrap."""
        started = await self.resolved.start(migrate=migrate)
        return OpenStack(dict(self.resolved.backends), started.stores.layered(self.layers))

    @asynccontextmanager
    async def opened(self, *, migrate: bool) -> AsyncIterator[OpenStack]:
        """:meth:`open`, closed on the way out."""
        stack = await self.open(migrate=migrate)
        try:
            yield stack
        finally:
            await stack.close()
