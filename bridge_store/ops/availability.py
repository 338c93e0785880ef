"""Whether each backend answers, as the calls made to it see it; transitions logged once.

A backend is up until a call to it fails with ``unavailable``, then down until a call
to it succeeds again. Each change is logged once: a warning naming the backend by its
redacted URL and the first failure, then an info line when it answers again; never a
line per request. The state is kept per backend URL (substores routed to one URL share
it), with the count of calls it failed by kind, for the metrics to read
(``bridge_store_backend_up``, ``bridge_store_backend_errors``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping

from ..errors import Code, ConnectError
from ..stack.stores import Routes
from ..urls import redact

logger = logging.getLogger(__name__)

#: Codes a backend fails a call with (a client's mistakes are not the backend's).
BACKEND_FAILURES = frozenset({Code.UNAVAILABLE, Code.RESOURCE_EXHAUSTED})
#: The kind counted for an exception that is no Connect error (answered ``internal``).
BROKE = "internal"


class Availability:
    """One backend's state: ``up``, and the calls it failed by kind."""

    def __init__(self, url: str) -> None:
        #: The backend's URL without its secrets, as logged.
        self.name = redact(url)
        self.up = True
        #: How many times the backend went down.
        self.outages = 0
        self.failures: Counter[str] = Counter()
        self._down_since = 0.0

    def failed(self, error: ConnectError) -> None:
        """A call failed with one of :data:`BACKEND_FAILURES`; ``unavailable`` means down."""
        self.failures[error.code.value] += 1
        if error.code is Code.UNAVAILABLE and self.up:
            self.up = False
            self.outages += 1
            self._down_since = time.monotonic()
            logger.warning("%s is unavailable: %s", self.name, error.message)

    def broke(self) -> None:
        """A call failed with an unexpected exception (logged where it is answered)."""
        self.failures[BROKE] += 1

    def succeeded(self) -> None:
        """A call was answered: the backend is up, if it was not already."""
        if not self.up:
            self.up = True
            logger.info(
                "%s answers again after %.1f s",
                self.name,
                time.monotonic() - self._down_since,
            )

    def snapshot(self) -> tuple[bool, Mapping[str, int]]:
        """Whether the backend is up, and its failed calls by kind so far."""
        return self.up, dict(self.failures)


class BackendAvailability:
    """The :class:`Availability` of every backend the routes name."""

    def __init__(self, routes: Routes) -> None:
        self._by_url = {url: Availability(url) for url in routes.urls()}
        #: Every backend, by redacted URL.
        self.backends: dict[str, Availability] = {
            state.name: state for state in self._by_url.values()
        }
        self._by_substore: dict[str, Availability] = {
            "agents": self._by_url[routes.agents],
            "runs": self._by_url[routes.runs],
            "runEvents": self._by_url[routes.run_events],
            "checkpoints": self._by_url[routes.checkpoints],
        }

    def of(self, substore: object) -> Availability | None:
        """The backend serving ``substore``, or None for a name no route has."""
        return self._by_substore.get(substore) if isinstance(substore, str) else None

    def of_url(self, url: str) -> Availability:
        """The backend at ``url``, one the routes name."""
        return self._by_url[url]
