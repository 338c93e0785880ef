"""Postgres: the search index's two functions in PL/pgSQL, whose plans a session keeps.

Revisions 0003 and 0007 wrote ``bridge_store_search_text`` and
``bridge_store_search_name`` as SQL functions whose body selects from subqueries. Such
a function cannot be inlined, so Postgres parses and plans its body again for every
statement that evaluates it, which every insert into ``run_events`` and every write
of an agent's document does for its GIN index. That planning was most of the cost
of an append: with the bench's mix of events, 780 µs of Postgres CPU per insert
against 170 µs without the index (docs/performance.md).

PL/pgSQL prepares each expression of a function once per session and keeps the plan,
so the same reading costs 265 µs there. The new bodies read the same parts of the
event with the same operators in the same order, so they pick the same text and
give NULL where the old ones did (``tests/test_search_functions.py`` compares the two
on hand-written and generated events). The indexes are built again all the same:
an index over an IMMUTABLE function is only as right as that function's answers for
every stored row, and a rebuild makes sure of it. SQLite's triggers do not change.

The way down puts the SQL functions of 0003 (names) and 0007 (text) back and builds
the indexes again.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 02:10:00
"""

# The statements are put together from this file's constants only, never from input.
# ruff: noqa: S608

from __future__ import annotations

import importlib
from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The longest piece of one event's text the index reads (as in 0003 and 0007).
_TEXT_CHARS = 100_000
_WORDS = "regexp_replace({text}, '[^[:alnum:]]+', ' ', 'g')"


def _value(json: str) -> str:
    """A JSON value as text, as 0007 reads it: a string as it is, null as NULL,
    anything else its JSON (``json`` is parenthesised: ``::`` binds tighter than ``->``)."""
    return (
        f"CASE jsonb_typeof(({json})) WHEN 'string' THEN ({json}) #>> '{{}}' "
        f"WHEN 'null' THEN NULL ELSE ({json})::text END"
    )


_CONTENT_ITEMS = f"""(SELECT string_agg(CASE item ->> 'type'
            WHEN 'text' THEN item ->> 'text'
            WHEN 'tool_use' THEN concat_ws(' ', {_value("item -> 'name'")},
                {_value("item -> 'input'")}) END, ' ')
        FROM jsonb_array_elements(content_json) AS item
        WHERE jsonb_typeof(item) = 'object')"""

_TOOL_CALL = "concat_ws(' ', {})".format(
    ", ".join(_value(f"message_json -> '{field}'") for field in ("name", "args", "result"))
)

# Each branch reads what 0007's CASE read for the same kind: a user or assistant
# message's content (a string, or its text and tool_use items), a tool call's name,
# arguments and result, a status's message; any other event has no text (NULL).
_TEXT_FUNCTION = f"""CREATE OR REPLACE FUNCTION bridge_store_search_text(doc text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    event_json jsonb := bridge_store_search_json(doc);
    message_json jsonb;
    message_kind text;
    content_json jsonb;
    picked text;
BEGIN
    IF event_json #>> '{{payload,type}}' IS DISTINCT FROM 'sdk_message' THEN
        RETURN NULL;
    END IF;
    message_json := event_json #> '{{payload,message}}';
    message_kind := message_json ->> 'type';
    IF message_kind IN ('user', 'assistant') THEN
        content_json := message_json #> '{{message,content}}';
        IF jsonb_typeof(content_json) = 'string' THEN
            picked := content_json #>> '{{}}';
        ELSIF jsonb_typeof(content_json) = 'array' THEN
            picked := {_CONTENT_ITEMS};
        END IF;
    ELSIF message_kind = 'tool_call' THEN
        picked := {_TOOL_CALL};
    ELSIF message_kind = 'status' THEN
        picked := {_value("message_json -> 'message'")};
    END IF;
    RETURN {_WORDS.format(text=f"left(picked, {_TEXT_CHARS})")};
END
$$"""

_NAME_FUNCTION = f"""CREATE OR REPLACE FUNCTION bridge_store_search_name(doc text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    agent_json jsonb := bridge_store_search_json(doc);
BEGIN
    IF jsonb_typeof(agent_json -> 'name') = 'string' THEN
        RETURN {_WORDS.format(text="agent_json ->> 'name'")};
    END IF;
    RETURN NULL;
END
$$"""

_INDEXES = [
    """CREATE INDEX ix_run_events_search ON run_events
        USING gin (to_tsvector('simple'::regconfig, bridge_store_search_text(doc)))""",
    """CREATE INDEX ix_agents_search ON agents
        USING gin (to_tsvector('simple'::regconfig, bridge_store_search_name(doc)))""",
]

#: The functions are dropped, not replaced, on either way (0003's statement creates
#: its function rather than replacing it), after the indexes that use them.
_DROP = [
    "DROP INDEX ix_run_events_search",
    "DROP INDEX ix_agents_search",
    "DROP FUNCTION bridge_store_search_text(text)",
    "DROP FUNCTION bridge_store_search_name(text)",
]


def _earlier(revision_module: str) -> object:
    """An earlier revision's module: the way down writes its functions as it did."""
    return importlib.import_module(f"bridge_store_migrations.versions.{revision_module}")


def _sql_functions() -> list[str]:
    """0003's name function and 0007's text function, as those revisions create them."""
    search, search_tools = _earlier("0003_search"), _earlier("0007_search_tools")
    name = next(
        statement
        for statement in search._POSTGRES_UPGRADE  # type: ignore[attr-defined]
        if "FUNCTION bridge_store_search_name" in statement
    )
    return [name, search_tools._postgres_function(tools=True)]  # type: ignore[attr-defined]


def _run(statements: list[str]) -> None:
    # As written: no bind parameters (``[:alnum:]`` is a regular expression, not one).
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _run([*_DROP, _TEXT_FUNCTION, _NAME_FUNCTION, *_INDEXES])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _run([*_DROP, *_sql_functions(), *_INDEXES])
