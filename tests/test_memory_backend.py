"""The reference in-memory backend passes the conformance suite."""

import tracemalloc
from typing import cast

import pytest

from bridge_store.backend.substores import Backend, stored_event
from bridge_store.conformance import (
    ExportQueueConformance,
    LeaseConformance,
    StoreConformance,
)
from bridge_store.wire import jsontext
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


class TestMemoryExportQueue(ExportQueueConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"

    @pytest.fixture
    def queue_backends(self) -> tuple[Backend, Backend]:
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


def _bytes_kept(store: RunEvents, events: list[dict[str, object]]) -> int:
    """What appending ``events`` leaves allocated, by tracemalloc."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for event in events:
            store.append(event)
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_stored_event_costs_its_own_size_not_orjsons_buffer() -> None:
    """orjson's output keeps its whole growth buffer (8 KiB for a 1 KiB event): the
    memory backend keeps each event's text in an allocation of its own size, or a
    server running memory:// held eight times the history it stores."""
    text = "x" * 1000
    events: list[dict[str, object]] = [
        {"runId": "r1", "idempotencyKey": f"k{n}", "payload": {"text": text}} for n in range(200)
    ]
    stored = len(jsontext.dumps(stored_event(events[0], 1)))
    kept = _bytes_kept(RunEvents(), events) / len(events)
    # The text, the bytes object's header, the key and the log's slots: under 1.6x.
    assert stored <= kept < 1.6 * stored, (kept, stored)


def test_kept_json_text_is_the_same_text_in_its_own_allocation() -> None:
    document = {"a": "é" * 700, "n": [1, 2.5, None, True]}
    text = jsontext.dumps(document)  # and the str's UTF-8 form, which CPython caches
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = jsontext.dumps_kept(document)
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept == text
    assert size < len(kept) + 64, (size, len(kept))
