"""The reference in-memory backend passes the conformance suite."""

from typing import cast

import pytest

from bridge_store.conformance import LeaseConformance, StoreConformance
from bridge_store.substores import Backend
from bridge_store_memory import MemoryBackend
from bridge_store_memory.state import RunEvents


class TestMemoryBackend(StoreConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"


class TestMemoryLeases(LeaseConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"

    @pytest.fixture
    def lease_backends(self) -> tuple[Backend, Backend]:
        # Every memory:// URL is a store of its own: two servers share one only in-process.
        backend = cast("Backend", MemoryBackend())
        return backend, backend


def _event(key: str | None) -> dict[str, object]:
    return {"runId": "r1", "idempotencyKey": key, "payload": {"parts": [{"text": "hi"}]}}


def test_stored_events_are_nobody_elses_objects() -> None:
    """Events are kept as JSON text: what a caller holds (the event it appended, the
    answer, a listed page) can change without changing what is stored."""
    events = RunEvents()
    appended = _event("k1")
    answer = events.append(appended)
    appended["payload"]["parts"].append({"text": "caller"})  # type: ignore[index]
    answer["payload"]["parts"][0]["text"] = "answer"
    page = events.list("r1", after_seq=0, limit=10)
    page[0]["payload"]["parts"].clear()
    again = events.append(_event("k1"))  # the same key: the stored event, read back
    again["payload"]["parts"][0]["text"] = "replayed"
    assert events.list("r1", after_seq=0, limit=10) == [
        {"runId": "r1", "seq": 1, "offset": "1", **_event("k1")}
    ]


def test_an_event_reads_back_as_the_sql_backends_give_it() -> None:
    """JSON text holds no NaN: a stored NaN reads back as null, as the SQL, Redis and
    S3 backends (which all store through jsontext) give it back."""
    events = RunEvents()
    events.append({"runId": "r1", "idempotencyKey": None, "payload": {"n": float("nan")}})
    [stored] = events.list("r1", after_seq=0, limit=10)
    assert stored["payload"] == {"n": None}
