"""Postgres: revision 0009's PL/pgSQL search functions pick the text 0003's and 0007's
SQL functions picked, for every kind of event and agent, including the hostile ones.

The GIN indexes over these functions were built by the SQL functions on stores that
upgraded through 0007, and their rows are searched with the new ones: a difference
would make the search miss or invent hits. Each case is written as JSON text the way
a store holds it and handed to the old and the new function in one query.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.postgres

#: The functions of 0007 (text) and 0003 (names), created beside head's under these names.
OLD_TEXT, OLD_NAME = "search_text_0007", "search_name_0003"


def _old_functions() -> list[str]:
    """The SQL functions 0009's way down puts back, under the names above."""
    plpgsql = importlib.import_module("bridge_store_migrations.versions.0009_search_plpgsql")
    name, text = plpgsql._sql_functions()
    return [
        text.replace("FUNCTION bridge_store_search_text(", f"FUNCTION {OLD_TEXT}("),
        name.replace("FUNCTION bridge_store_search_name(", f"FUNCTION {OLD_NAME}("),
    ]


class Functions:
    """One connection to a database at head with the old functions beside the new."""

    def __init__(self, url: str) -> None:
        import asyncpg  # type: ignore[import-untyped]

        self.runner = asyncio.Runner()
        self.connection = self.runner.run(asyncpg.connect(url))
        for statement in _old_functions():
            self.runner.run(self.connection.execute(statement))

    def differences(self, old: str, new: str, docs: list[str]) -> list[tuple[str, Any, Any]]:
        """(doc, old answer, new answer) of every doc the two functions answer differently."""
        # ``old`` and ``new`` are function names of this module, never input.
        rows = self.runner.run(
            self.connection.fetch(
                f"SELECT doc, {old}(doc) AS was, {new}(doc) AS now "  # noqa: S608
                "FROM unnest($1::text[]) AS doc "
                f"WHERE {old}(doc) IS DISTINCT FROM {new}(doc)",
                docs,
            )
        )
        return [(row["doc"], row["was"], row["now"]) for row in rows]

    def languages(self) -> dict[str, str]:
        rows = self.runner.run(
            self.connection.fetch(
                "SELECT proname, lanname FROM pg_proc JOIN pg_language l ON l.oid = prolang "
                "WHERE proname LIKE 'bridge_store_search_%'"
            )
        )
        return {row["proname"]: row["lanname"] for row in rows}

    def close(self) -> None:
        self.runner.run(self.connection.close())
        self.runner.close()


@pytest.fixture(scope="module")
def functions(make_migrated_postgres_url: Callable[[], str]) -> Iterator[Functions]:
    opened = Functions(make_migrated_postgres_url())
    try:
        yield opened
    finally:
        opened.close()


# -- what an event or an agent can hold ----------------------------------------------

#: Text with punctuation, accents, NULs (``\u0000`` in the JSON, which jsonb refuses)
#: and the characters the word split turns into spaces; no lone surrogates here.
words = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], max_codepoint=0x1F600), max_size=30
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | words
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=8,
)
items = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": values}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use")}, optional={"name": values, "input": values}
    ),
    st.dictionaries(st.sampled_from(["type", "text", "name"]), values, max_size=3),
    values,
)
contents = words | st.lists(items, max_size=4) | values
kinds = st.sampled_from(["user", "assistant", "tool_call", "status", "request", "thinking"])
#: A user or assistant message's body, or a status's message (then any value).
bodies = st.fixed_dictionaries({"role": words, "content": contents}) | values
fields = {"message": bodies, "name": values, "args": values, "result": values}
#: Messages with every field a kind may read, most of the time; some lack fields.
messages = st.one_of(
    st.fixed_dictionaries({"type": kinds, **fields}),
    st.fixed_dictionaries({"type": kinds, **fields}),
    st.fixed_dictionaries({"type": kinds}, optional=fields),
    values,
)
#: Mostly events the index reads; some a step off (another payload type, no message).
events = st.one_of(
    st.fixed_dictionaries(
        {
            "eventType": st.just("run_stream_event"),
            "payload": st.fixed_dictionaries({"type": st.just("sdk_message"), "message": messages}),
        }
    ),
    st.fixed_dictionaries(
        {"eventType": st.just("run_stream_event")},
        optional={
            "payload": st.fixed_dictionaries(
                {"type": st.sampled_from(["sdk_message", "status", "SDK_MESSAGE"])},
                optional={"message": messages},
            )
            | values
        },
    ),
)
agents = st.fixed_dictionaries({"agentId": words}, optional={"name": values}) | values


def as_stored(document: Any, ascii_only: bool) -> str:
    return json.dumps(document, ensure_ascii=ascii_only)


#: Hand-written: each branch of the old CASE, and JSON that jsonb cannot take (a NUL,
#: a lone surrogate). A store holds only JSON it wrote, so every case is JSON.
EDGE_EVENTS = [
    '{"payload": {"type": "sdk_message", "message": {"type": "user", '
    '"message": {"content": "fix routes/login.py, please"}}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "assistant", "message": '
    '{"content": [{"type": "text", "text": "done"}, 7, {"type": "tool_use", "name": '
    '"read_file", "input": {"path": "a.py"}}, {"type": "image"}]}}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "assistant", '
    '"message": {"content": []}}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "tool_call", "name": null, '
    '"args": true, "result": 1.5e300}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "status", "message": null}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "status", "message": "kaput"}}}',
    '{"payload": {"type": "sdk_message", "message": ["user"]}}',
    '{"payload": {"type": "sdk_message", "message": "user"}}',
    '{"payload": {"type": "sdk_message"}}',
    '{"payload": "sdk_message"}',
    "[1, 2, 3]",
    '"just a string"',
    "null",
    '{"payload": {"type": "sdk_message", "message": {"type": "user", '
    '"message": {"content": "nul \\u0000 inside"}}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "user", '
    '"message": {"content": "lone \\ud800 surrogate"}}}}',
    '{"payload": {"type": "sdk_message", "message": {"type": "user", '
    '"message": {"content": "' + "long words " * 12_000 + '"}}}}',
]
EDGE_AGENTS = [
    '{"name": "Fix the login redirect"}',
    '{"name": 42}',
    '{"name": null}',
    '{"name": "caf\\u00e9 \\u0000 bar"}',
    '{"name": "lone \\udfff"}',
    "[]",
]


def test_head_writes_both_functions_in_plpgsql(functions: Functions) -> None:
    languages = functions.languages()
    assert languages["bridge_store_search_text"] == "plpgsql"
    assert languages["bridge_store_search_name"] == "plpgsql"


def test_hand_written_events_and_agents_get_the_old_text(functions: Functions) -> None:
    assert functions.differences(OLD_TEXT, "bridge_store_search_text", EDGE_EVENTS) == []
    assert functions.differences(OLD_NAME, "bridge_store_search_name", EDGE_AGENTS) == []


def test_the_functions_tell_hand_written_cases_apart(functions: Functions) -> None:
    # The comparison above is only worth something if the cases pick different texts.
    rows = functions.runner.run(
        functions.connection.fetch(
            "SELECT DISTINCT bridge_store_search_text(doc) FROM unnest($1::text[]) AS doc",
            EDGE_EVENTS,
        )
    )
    picked = {row[0] for row in rows}
    assert {"fix routes login py please", "done read file path a py ", "kaput", None} <= picked


@settings(settings.get_profile("fuzz"), max_examples=150)
@given(st.lists(events, min_size=1, max_size=8), st.booleans())
@example([{"payload": {"type": "sdk_message", "message": {"type": "tool_call"}}}], True)
def test_generated_events_get_the_old_text(
    functions: Functions, documents: list[Any], ascii_only: bool
) -> None:
    docs = [as_stored(document, ascii_only) for document in documents]
    assert functions.differences(OLD_TEXT, "bridge_store_search_text", docs) == []


@settings(settings.get_profile("fuzz"), max_examples=60)
@given(st.lists(agents, min_size=1, max_size=8), st.booleans())
def test_generated_agents_get_the_old_name(
    functions: Functions, documents: list[Any], ascii_only: bool
) -> None:
    docs = [as_stored(document, ascii_only) for document in documents]
    assert functions.differences(OLD_NAME, "bridge_store_search_name", docs) == []
