"""Full-text search: an index of agent names and of the user and assistant text of events.

The viewer's search asks it which agents and runs can match a query (see
``bridge_store_sql.search``); the database keeps it current on every write, so no
backend code writes to it.

- SQLite: two contentless FTS5 tables, ``search_agents`` (names) and ``search_events``
  (each event's user or assistant text), whose rowids are the ids of
  ``search_agent_rows`` / ``search_event_rows`` (an INTEGER PRIMARY KEY, which VACUUM
  keeps, unlike the implicit rowids of the keyed tables). Triggers on ``agents`` and
  ``run_events`` fill them; a deletion hands FTS5 the text it indexed, computed again
  from the deleted row by the same expression. Tokens are unicode61's: runs of letters
  and digits, case- and diacritic-folded.
- Postgres: GIN expression indexes over ``to_tsvector('simple', ...)`` of two
  IMMUTABLE functions of ``doc`` that pick the same text, with every run of characters
  other than letters and digits made a space first, so the tokens are runs of letters
  and digits there too (the default parser would keep ``routes/login.py`` or an email
  address as one token). An event's text is indexed up to its first 100,000
  characters, which keeps every tsvector well under Postgres's 1 MB limit.

Both index text only as stored in ``doc``: event text is never sealed (encryption
covers ``sdkMetadata`` and blobs), so the index holds nothing the table does not.

A later revision that rebuilds ``agents`` or ``run_events`` on SQLite (batch mode copies
the table) drops these triggers with it and must create them again.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 23:00:00
"""

# The statements are put together from this file's constants only, never from input.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The longest piece of one event's text the Postgres index reads.
_POSTGRES_TEXT_CHARS = 100_000


def _sqlite_is_text(doc: str) -> str:
    """Whether the event ``doc`` is a user or assistant message (so may hold text)."""
    return (
        f"(json_extract({doc}, '$.payload.type') = 'sdk_message' "
        f"AND json_extract({doc}, '$.payload.message.type') IN ('user', 'assistant'))"
    )


def _sqlite_text(doc: str) -> str:
    """The user or assistant text of the event ``doc``, as the viewer's transcript reads
    it: a bare string content, or the ``text`` of each ``{"type": "text"}`` item.

    SQLite's JSON functions end a string at a NUL (``\\u0000``), so those are read as
    spaces, as on Postgres.
    """
    return f"""(SELECT coalesce(group_concat(CASE
            WHEN part.key IS NULL AND part.type = 'text' THEN part.value
            WHEN part.type = 'object' THEN CASE
                WHEN json_extract(part.value, '$.type') = 'text'
                THEN json_extract(part.value, '$.text') END
        END, ' '), '')
        FROM json_each(replace({doc}, '\\u0000', '\\u0020'),
            '$.payload.message.message.content') AS part)"""


def _sqlite_name(doc: str) -> str:
    """An agent's name (a string, else empty)."""
    name = f"CASE json_type({doc}, '$.name') WHEN 'text' THEN json_extract({doc}, '$.name') END"
    return f"coalesce({name}, '')"


_SQLITE_UPGRADE = [
    """CREATE TABLE search_agent_rows (
        id INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        UNIQUE (tenant, agent_id))""",
    """CREATE TABLE search_event_rows (
        id INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        UNIQUE (tenant, run_id, seq))""",
    "CREATE VIRTUAL TABLE search_agents USING fts5(name, content='')",
    "CREATE VIRTUAL TABLE search_events USING fts5(body, content='')",
    # Agents: a row per agent (its name may be empty, and change later).
    f"""CREATE TRIGGER search_agents_insert AFTER INSERT ON agents BEGIN
        INSERT INTO search_agent_rows (tenant, agent_id) VALUES (NEW.tenant, NEW.agent_id);
        INSERT INTO search_agents (rowid, name)
            VALUES (last_insert_rowid(), {_sqlite_name("NEW.doc")});
    END""",
    f"""CREATE TRIGGER search_agents_update AFTER UPDATE OF doc ON agents
    WHEN {_sqlite_name("OLD.doc")} IS NOT {_sqlite_name("NEW.doc")} BEGIN
        INSERT INTO search_agents (search_agents, rowid, name)
            SELECT 'delete', id, {_sqlite_name("OLD.doc")} FROM search_agent_rows
            WHERE tenant = OLD.tenant AND agent_id = OLD.agent_id;
        INSERT INTO search_agents (rowid, name)
            SELECT id, {_sqlite_name("NEW.doc")} FROM search_agent_rows
            WHERE tenant = NEW.tenant AND agent_id = NEW.agent_id;
    END""",
    f"""CREATE TRIGGER search_agents_delete AFTER DELETE ON agents BEGIN
        INSERT INTO search_agents (search_agents, rowid, name)
            SELECT 'delete', id, {_sqlite_name("OLD.doc")} FROM search_agent_rows
            WHERE tenant = OLD.tenant AND agent_id = OLD.agent_id;
        DELETE FROM search_agent_rows WHERE tenant = OLD.tenant AND agent_id = OLD.agent_id;
    END""",
    # Events: a row per user or assistant message (events are never updated).
    f"""CREATE TRIGGER search_events_insert AFTER INSERT ON run_events
    WHEN {_sqlite_is_text("NEW.doc")} BEGIN
        INSERT INTO search_event_rows (tenant, run_id, seq)
            VALUES (NEW.tenant, NEW.run_id, NEW.seq);
        INSERT INTO search_events (rowid, body)
            VALUES (last_insert_rowid(), {_sqlite_text("NEW.doc")});
    END""",
    f"""CREATE TRIGGER search_events_delete AFTER DELETE ON run_events
    WHEN {_sqlite_is_text("OLD.doc")} BEGIN
        INSERT INTO search_events (search_events, rowid, body)
            SELECT 'delete', id, {_sqlite_text("OLD.doc")} FROM search_event_rows
            WHERE tenant = OLD.tenant AND run_id = OLD.run_id AND seq = OLD.seq;
        DELETE FROM search_event_rows
            WHERE tenant = OLD.tenant AND run_id = OLD.run_id AND seq = OLD.seq;
    END""",
    # What is stored already.
    "INSERT INTO search_agent_rows (tenant, agent_id) SELECT tenant, agent_id FROM agents",
    f"""INSERT INTO search_agents (rowid, name)
        SELECT r.id, {_sqlite_name("a.doc")} FROM search_agent_rows AS r
        JOIN agents AS a ON a.tenant = r.tenant AND a.agent_id = r.agent_id""",
    f"""INSERT INTO search_event_rows (tenant, run_id, seq)
        SELECT tenant, run_id, seq FROM run_events WHERE {_sqlite_is_text("doc")}""",
    f"""INSERT INTO search_events (rowid, body)
        SELECT r.id, {_sqlite_text("e.doc")} FROM search_event_rows AS r
        JOIN run_events AS e ON e.tenant = r.tenant AND e.run_id = r.run_id AND e.seq = r.seq""",
]

_SQLITE_DOWNGRADE = [
    "DROP TRIGGER search_agents_insert",
    "DROP TRIGGER search_agents_update",
    "DROP TRIGGER search_agents_delete",
    "DROP TRIGGER search_events_insert",
    "DROP TRIGGER search_events_delete",
    "DROP TABLE search_agents",
    "DROP TABLE search_events",
    "DROP TABLE search_agent_rows",
    "DROP TABLE search_event_rows",
]

_POSTGRES_WORDS = "regexp_replace({text}, '[^[:alnum:]]+', ' ', 'g')"

#: The user or assistant text of an event (``content`` below), as the transcript reads it.
_POSTGRES_CONTENT_TEXT = f"""left(CASE jsonb_typeof(content)
            WHEN 'string' THEN content #>> '{{}}'
            WHEN 'array' THEN (
                SELECT string_agg(item ->> 'text', ' ')
                FROM jsonb_array_elements(content) AS item
                WHERE jsonb_typeof(item) = 'object' AND item ->> 'type' = 'text')
        END, {_POSTGRES_TEXT_CHARS})"""
_POSTGRES_NAME = "CASE jsonb_typeof(d -> 'name') WHEN 'string' THEN d ->> 'name' END"

_POSTGRES_UPGRADE = [
    # jsonb refuses two escapes JSON allows (\u0000, and lone surrogates, which only the
    # standard library's fallback writes): a write must not fail for the index's sake,
    # so NULs are read as spaces and a document that still does not parse goes
    # unindexed. The fast path skips the exception block (a subtransaction) whenever
    # the document has no \u escape at all.
    r"""CREATE FUNCTION bridge_store_search_json(doc text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    BEGIN
        IF strpos(doc, '\u') = 0 THEN
            RETURN doc::jsonb;
        END IF;
        BEGIN
            RETURN replace(doc, '\u0000', '\u0020')::jsonb;
        EXCEPTION WHEN OTHERS THEN
            RETURN NULL;
        END;
    END
    $$""",
    f"""CREATE FUNCTION bridge_store_search_text(doc text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT {_POSTGRES_WORDS.format(text=_POSTGRES_CONTENT_TEXT)}
        FROM (
            SELECT CASE WHEN d #>> '{{payload,type}}' = 'sdk_message'
                AND d #>> '{{payload,message,type}}' IN ('user', 'assistant')
                THEN d #> '{{payload,message,message,content}}' END AS content
            FROM (SELECT bridge_store_search_json(doc) AS d) AS parsed
        ) AS picked
    $$""",
    f"""CREATE FUNCTION bridge_store_search_name(doc text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT {_POSTGRES_WORDS.format(text=_POSTGRES_NAME)}
        FROM (SELECT bridge_store_search_json(doc) AS d) AS parsed
    $$""",
    """CREATE INDEX ix_run_events_search ON run_events
        USING gin (to_tsvector('simple'::regconfig, bridge_store_search_text(doc)))""",
    """CREATE INDEX ix_agents_search ON agents
        USING gin (to_tsvector('simple'::regconfig, bridge_store_search_name(doc)))""",
]

_POSTGRES_DOWNGRADE = [
    "DROP INDEX ix_agents_search",
    "DROP INDEX ix_run_events_search",
    "DROP FUNCTION bridge_store_search_name(text)",
    "DROP FUNCTION bridge_store_search_text(text)",
    "DROP FUNCTION bridge_store_search_json(text)",
]


def _run(statements: list[str]) -> None:
    # As written: no bind parameters (``[:alnum:]`` is a regular expression, not one).
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    _run(_SQLITE_UPGRADE if sqlite else _POSTGRES_UPGRADE)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    _run(_SQLITE_DOWNGRADE if sqlite else _POSTGRES_DOWNGRADE)
