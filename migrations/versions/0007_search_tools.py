"""Search tools and errors too: the full-text index also reads tool calls and statuses.

Revision 0003 indexes the user and assistant text of events. The viewer's search now
also matches a tool call's name, arguments and result, and the text of a status
(an error's message), so the index reads, per event:

- a user or assistant message: its text items, as before, and the name and input of
  each ``tool_use`` item (a call the model asked for);
- a ``tool_call`` message: its name, arguments and result;
- a ``status`` message: its ``message`` (an error's text).

Strings are read as they are, booleans as ``true``/``false``, objects, arrays and
numbers as their JSON text. On SQLite the two triggers on ``run_events`` are made
again with the new expression and the events index (``search_events`` and its row map)
is refilled from what is stored, since a contentless FTS5 table must be handed back
exactly the text it indexed to forget it. On Postgres ``bridge_store_search_text``
is replaced and its GIN index built again. The way down puts 0003's expression back
the same ways.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 18:00:00
"""

# The statements are put together from this file's constants only, never from input.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POSTGRES_TEXT_CHARS = 100_000
_MESSAGE = "$.payload.message"


# -- SQLite --------------------------------------------------------------------------


def _sqlite_value(doc: str, path: str) -> str:
    """A JSON value as text: a string as it is, true/false, anything else its JSON."""
    return (
        f"coalesce(CASE json_type({doc}, '{path}') WHEN 'true' THEN 'true' "
        f"WHEN 'false' THEN 'false' WHEN 'null' THEN NULL "
        f"ELSE json_extract({doc}, '{path}') END, '')"
    )


def _sqlite_kind(doc: str) -> str:
    return f"json_extract({doc}, '{_MESSAGE}.type')"


def _sqlite_is_text(doc: str, *, tools: bool) -> str:
    """Whether the event ``doc`` has text to index (0003's kinds, or these too)."""
    if not tools:
        kinds = "('user', 'assistant')"
        return (
            f"(json_extract({doc}, '$.payload.type') = 'sdk_message' "
            f"AND {_sqlite_kind(doc)} IN {kinds})"
        )
    return (
        f"(json_extract({doc}, '$.payload.type') = 'sdk_message' "
        f"AND ({_sqlite_kind(doc)} IN ('user', 'assistant', 'tool_call') "
        f"OR ({_sqlite_kind(doc)} = 'status' "
        f"AND json_type({doc}, '{_MESSAGE}.message') NOT IN ('null'))))"
    )


def _sqlite_content(doc: str, *, tools: bool) -> str:
    """The text items of a user or assistant message (and its tool_use items)."""
    tool_use = ""
    if tools:
        name, given = _sqlite_value("part.value", "$.name"), _sqlite_value("part.value", "$.input")
        tool_use = f"WHEN 'tool_use' THEN {name} || ' ' || {given}"
    return f"""(SELECT coalesce(group_concat(CASE
            WHEN part.key IS NULL AND part.type = 'text' THEN part.value
            WHEN part.type = 'object' THEN CASE json_extract(part.value, '$.type')
                WHEN 'text' THEN json_extract(part.value, '$.text') {tool_use} END
        END, ' '), '')
        FROM json_each(replace({doc}, '\\u0000', '\\u0020'),
            '{_MESSAGE}.message.content') AS part)"""


def _sqlite_text(doc: str, *, tools: bool) -> str:
    if not tools:
        return _sqlite_content(doc, tools=False)
    # SQLite's JSON functions end a string at a NUL: those are read as spaces.
    clean = f"replace({doc}, '\\u0000', '\\u0020')"
    call = " || ' ' || ".join(
        _sqlite_value(clean, f"{_MESSAGE}.{field}") for field in ("name", "args", "result")
    )
    return f"""(CASE {_sqlite_kind(doc)}
        WHEN 'tool_call' THEN {call}
        WHEN 'status' THEN {_sqlite_value(clean, f"{_MESSAGE}.message")}
        ELSE {_sqlite_content(doc, tools=True)} END)"""


def _sqlite_statements(*, tools: bool) -> list[str]:
    """Make the events index read ``tools``' kinds, and refill it from what is stored."""
    is_text, text = _sqlite_is_text("NEW.doc", tools=tools), _sqlite_text("NEW.doc", tools=tools)
    was_text, old = _sqlite_is_text("OLD.doc", tools=tools), _sqlite_text("OLD.doc", tools=tools)
    return [
        "DROP TRIGGER search_events_insert",
        "DROP TRIGGER search_events_delete",
        "INSERT INTO search_events (search_events) VALUES ('delete-all')",
        "DELETE FROM search_event_rows",
        f"""CREATE TRIGGER search_events_insert AFTER INSERT ON run_events
        WHEN {is_text} BEGIN
            INSERT INTO search_event_rows (tenant, run_id, seq)
                VALUES (NEW.tenant, NEW.run_id, NEW.seq);
            INSERT INTO search_events (rowid, body) VALUES (last_insert_rowid(), {text});
        END""",
        f"""CREATE TRIGGER search_events_delete AFTER DELETE ON run_events
        WHEN {was_text} BEGIN
            INSERT INTO search_events (search_events, rowid, body)
                SELECT 'delete', id, {old} FROM search_event_rows
                WHERE tenant = OLD.tenant AND run_id = OLD.run_id AND seq = OLD.seq;
            DELETE FROM search_event_rows
                WHERE tenant = OLD.tenant AND run_id = OLD.run_id AND seq = OLD.seq;
        END""",
        f"""INSERT INTO search_event_rows (tenant, run_id, seq)
            SELECT tenant, run_id, seq FROM run_events
            WHERE {_sqlite_is_text("doc", tools=tools)}""",
        f"""INSERT INTO search_events (rowid, body)
            SELECT r.id, {_sqlite_text("e.doc", tools=tools)} FROM search_event_rows AS r
            JOIN run_events AS e
            ON e.tenant = r.tenant AND e.run_id = r.run_id AND e.seq = r.seq""",
    ]


# -- Postgres ------------------------------------------------------------------------

_POSTGRES_WORDS = "regexp_replace({text}, '[^[:alnum:]]+', ' ', 'g')"


def _postgres_value(json: str) -> str:
    """A JSON value as text, as SQLite's reads it (``json`` is parenthesised: ``::``
    binds tighter than ``->``)."""
    return (
        f"CASE jsonb_typeof(({json})) WHEN 'string' THEN ({json}) #>> '{{}}' "
        f"WHEN 'null' THEN NULL ELSE ({json})::text END"
    )


def _postgres_content(*, tools: bool) -> str:
    """The text items of a user or assistant message's ``content`` (and, with ``tools``,
    the name and input of its tool_use items)."""
    tool_use = ""
    if tools:
        name, given = _postgres_value("item -> 'name'"), _postgres_value("item -> 'input'")
        tool_use = f"WHEN 'tool_use' THEN concat_ws(' ', {name}, {given})"
    return f"""CASE jsonb_typeof(content)
            WHEN 'string' THEN content #>> '{{}}'
            WHEN 'array' THEN (
                SELECT string_agg(CASE item ->> 'type'
                    WHEN 'text' THEN item ->> 'text' {tool_use} END, ' ')
                FROM jsonb_array_elements(content) AS item
                WHERE jsonb_typeof(item) = 'object')
        END"""


def _postgres_function(*, tools: bool) -> str:
    """``bridge_store_search_text``: each part of the event read once (its kind, its
    message, its content), then the text of its kind."""
    picked = f"CASE WHEN kind IN ('user', 'assistant') THEN {_postgres_content(tools=tools)}"
    if tools:
        call = ", ".join(_postgres_value(f"message -> '{f}'") for f in ("name", "args", "result"))
        picked += f"""
            WHEN kind = 'tool_call' THEN concat_ws(' ', {call})
            WHEN kind = 'status' THEN {_postgres_value("message -> 'message'")}"""
    picked += " END"
    text = f"left({picked}, {_POSTGRES_TEXT_CHARS})"
    return f"""CREATE OR REPLACE FUNCTION bridge_store_search_text(doc text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT {_POSTGRES_WORDS.format(text=text)}
        FROM (
            SELECT message ->> 'type' AS kind, message,
                message #> '{{message,content}}' AS content
            FROM (
                SELECT CASE WHEN d #>> '{{payload,type}}' = 'sdk_message'
                    THEN d #> '{{payload,message}}' END AS message
                FROM (SELECT bridge_store_search_json(doc) AS d) AS parsed
            ) AS picked
        ) AS parts
    $$"""


def _postgres_statements(*, tools: bool) -> list[str]:
    return [
        "DROP INDEX ix_run_events_search",
        _postgres_function(tools=tools),
        """CREATE INDEX ix_run_events_search ON run_events
            USING gin (to_tsvector('simple'::regconfig, bridge_store_search_text(doc)))""",
    ]


def _run(*, tools: bool) -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    statements = _sqlite_statements(tools=tools) if sqlite else _postgres_statements(tools=tools)
    # As written: no bind parameters (``[:alnum:]`` is a regular expression, not one).
    for statement in statements:
        bind.exec_driver_sql(statement)


def upgrade() -> None:
    _run(tools=True)


def downgrade() -> None:
    _run(tools=False)
