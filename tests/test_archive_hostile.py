"""``bridge-store import`` of hostile archives whose SHA-256s all match: each is one line
on stderr and exit status 2, with nothing written (issue 21)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from tests.support.archives import (
    Hostile,
    Members,
    add_after,
    edit_first,
    edit_lines,
    edit_manifest,
    member,
    read_members,
    without,
)
from tests.support.lifecycle import on_stores, seed, snapshot
from tests.test_copy import routes, sqlite_arguments

BLOB = "checkpoints/default/6167656e742d31/626c6f622d30"  # agent-1, blob-0


@pytest.fixture(scope="module")
def good_members(tmp_path_factory: pytest.TempPathFactory) -> Members:
    """A real export's members: two tenants, two agents each, small blobs."""
    directory = tmp_path_factory.mktemp("good")
    source = sqlite_arguments(directory / "source.db")
    on_stores(routes(source), lambda stores: seed(stores, agents=2, events=3, blob_size=100))
    path = directory / "good.tar.gz"
    assert main(["export", *source, "--output", str(path)]) == 0
    return read_members(path)


def _set(path: str, value: Any) -> Any:
    """An edit that sets ``path`` (keys separated by slashes) of a parsed JSON value."""
    *parents, last = path.split("/")

    def edit(value_of: Any) -> None:
        for key in parents:
            value_of = value_of[int(key)] if isinstance(value_of, list) else value_of[key]
        value_of[last] = value

    return edit


def _drop(key: str) -> Any:
    """An edit that removes ``key`` of a parsed JSON object."""

    def edit(value: dict[str, Any]) -> None:
        del value[key]

    return edit


def _raw(text: bytes) -> Any:
    """An edit that replaces a line with ``text`` as it is."""
    return lambda _entry: text


def _manifest(edit: Any) -> Any:
    return lambda members: edit_manifest(members, edit)


def _renamed(old: str, new: str) -> Any:
    def mutate(members: Members) -> Members:
        result = []
        for info, data in members:
            if info.name == old:
                info = member(new, pax_headers=dict(info.pax_headers))
            result.append((info, data))
        return result

    return mutate


def _moved_to_end(name: str) -> Any:
    def mutate(members: Members) -> Members:
        moved = [m for m in members if m[0].name == name]
        return [m for m in members if m[0].name != name] + moved

    return mutate


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


EVENT_LINE = (
    b'{"tenant":"default","event":{"runId":"run-0-0","seq":1,"offset":"1","eventType":"e",'
    b'"payload":%s,"payloadRef":null,"idempotencyKey":null,"createdAt":5}}'
)

HOSTILE: dict[str, Hostile] = {
    # -- the manifest: wrong types at every level, missing keys, bad names --
    "manifest tenants is a list": Hostile(
        "manifest.tenants must be an object, not list", _manifest(_set("tenants", ["default"]))
    ),
    "manifest is a list": Hostile("manifest must be an object, not list", _manifest(lambda m: [m])),
    "manifest without members": Hostile(
        "manifest.members must be an object", _manifest(_drop("members"))
    ),
    "manifest without agents": Hostile(
        "manifest.agents must be a list", _manifest(_drop("agents"))
    ),
    "manifest count is text": Hostile(
        "manifest.tenants['default'].runs must be a count",
        _manifest(_set("tenants/default/runs", "4")),
    ),
    "manifest count is true": Hostile(
        "must be a count", _manifest(_set("tenants/default/agents", True))
    ),
    "manifest count is negative": Hostile(
        "must be a count", _manifest(_set("tenants/team-b/checkpoints", -1))
    ),
    "manifest integer agent_id": Hostile(
        "manifest.agents[0].agentId must be a non-empty string",
        _manifest(_set("agents/0/agentId", 7)),
    ),
    "manifest agent of an unlisted tenant": Hostile(
        "is not a tenant the manifest lists", _manifest(_set("agents/0/tenant", "team-x"))
    ),
    "manifest agent twice": Hostile(
        "lists agent 'agent-1' of tenant default again",
        _manifest(lambda m: m["agents"].append(m["agents"][0])),
    ),
    "manifest tenant name traverses": Hostile(
        "manifest.tenants: '../../x' is not a tenant name",
        _manifest(lambda m: m["tenants"].update({"../../x": m["tenants"]["default"]})),
    ),
    "manifest tenant name empty": Hostile(
        "manifest.tenants: '' is not a tenant name",
        _manifest(lambda m: m["tenants"].update({"": m["tenants"]["default"]})),
    ),
    "manifest digest not hex": Hostile(
        "must be a SHA-256 in lowercase hex",
        after=_manifest(_set("members/runs.jsonl/sha256", "zz")),
    ),
    "manifest of another version": Hostile(
        "this bridge-store reads bridge-store-archive version 1",
        _manifest(_set("version", 2)),
    ),
    "manifest lists a member the archive lacks": Hostile(
        "the manifest lists members the archive does not hold: ['extra.jsonl']",
        _manifest(_set("members/extra.jsonl", {"sha256": "0" * 64, "size": 0})),
    ),
    "manifest counts another number of runs": Hostile(
        "holds 4 runs of tenant default; its manifest lists 5",
        _manifest(_set("tenants/default/runs", 5)),
    ),
    "member size differs from the manifest's": Hostile(
        "member runs.jsonl is damaged (its size differs from the manifest's)",
        after=_manifest(_set("members/runs.jsonl/size", 1)),
    ),
    # -- members: absent, unlisted, out of order, twice, not files, traversing names --
    "a listed member is absent": Hostile(
        "is incomplete (missing: agents.jsonl)", without("agents.jsonl")
    ),
    "the manifest is absent": Hostile(
        "unexpected member 'runs.jsonl' (expected checkpoint blobs or the manifest)",
        without("manifest.json"),
    ),
    "a member is not listed": Hostile(
        "unexpected member 'extra.jsonl' (after the last member)",
        add_after("agents.jsonl", member("extra.jsonl"), b"{}\n"),
    ),
    "members out of order": Hostile(
        "unexpected member 'agents.jsonl' (expected runEvents.jsonl)",
        _moved_to_end("runEvents.jsonl"),
    ),
    "a blob after the manifest": Hostile("unexpected member 'checkpoints/", _moved_to_end(BLOB)),
    "a blob twice": Hostile(
        "holds 5 checkpoints of tenant default; its manifest lists 4",
        lambda ms: [*ms[:2], next(m for m in ms if m[0].name == BLOB), *ms[2:]],
    ),
    "path traversal": Hostile(
        "unexpected member '../../etc/cron.d/x'",
        add_after("bridge-store-archive.json", member("../../etc/cron.d/x"), b"x"),
    ),
    "path traversal under checkpoints": Hostile(
        "unexpected member 'checkpoints/../../x'",
        add_after("bridge-store-archive.json", member("checkpoints/../../x"), b"x"),
    ),
    "absolute member name": Hostile(
        "unexpected member '/etc/passwd'",
        add_after("bridge-store-archive.json", member("/etc/passwd"), b"x"),
    ),
    "symbolic link member": Hostile(
        "is a symbolic link: an archive holds only regular files",
        add_after("bridge-store-archive.json", member(BLOB, tarfile.SYMTYPE, linkname="/etc")),
    ),
    "hard link member": Hostile(
        "is a hard link",
        add_after(
            "bridge-store-archive.json", member(BLOB, tarfile.LNKTYPE, linkname="/etc/shadow")
        ),
    ),
    "device member": Hostile(
        "is a device or FIFO",
        add_after("bridge-store-archive.json", member(BLOB, tarfile.CHRTYPE, devmajor=1)),
    ),
    "fifo member": Hostile(
        "is a device or FIFO",
        add_after("bridge-store-archive.json", member(BLOB, tarfile.FIFOTYPE)),
    ),
    "directory member": Hostile(
        "is a directory",
        add_after("bridge-store-archive.json", member("checkpoints", tarfile.DIRTYPE)),
    ),
    "sparse member": Hostile(
        "a sparse member",
        add_after("bridge-store-archive.json", member(BLOB, tarfile.GNUTYPE_SPARSE)),
        tar_format=tarfile.GNU_FORMAT,
    ),
    "blob name with a bad tenant": Hostile(
        "tenant 'Team' is not a tenant name", _renamed(BLOB, "checkpoints/Team/61/62")
    ),
    "blob name with an odd hex id": Hostile(
        "unexpected member 'checkpoints/default/616/62'",
        _renamed(BLOB, "checkpoints/default/616/62"),
    ),
    "blob id not UTF-8": Hostile(
        "an id in it is not UTF-8", _renamed(BLOB, "checkpoints/default/ff/62")
    ),
    "blob id with NUL": Hostile(
        "checkpoint.blobId must not contain NUL", _renamed(BLOB, "checkpoints/default/61/6200")
    ),
    "blob id with a lone surrogate": Hostile(
        "unpaired surrogates", _renamed(BLOB, "checkpoints/default/61/eda080")
    ),
    "blob without its digest": Hostile(
        "is damaged (its SHA-256 differs)",
        after=lambda ms: [(member(i.name, size=i.size) if i.name == BLOB else i, d) for i, d in ms],
    ),
    # -- lines: types, missing keys, names, numbers, text, nesting --
    "line is a list": Hostile(
        'line 1 of runs.jsonl must be an object with "tenant" and "run"',
        edit_first("runs.jsonl", _raw(b"[1, 2]")),
    ),
    "line without tenant": Hostile(
        'must be an object with "tenant" and "agent"',
        edit_first("agents.jsonl", _drop("tenant")),
    ),
    "line tenant is a number": Hostile(
        "a tenant must be a string", edit_first("runs.jsonl", _set("tenant", 5))
    ),
    "line tenant traverses": Hostile(
        "tenant '../../x' must be 1-63 characters",
        edit_first("runs.jsonl", _set("tenant", "../../x")),
    ),
    "line tenant empty": Hostile(
        "tenant '' must be", edit_first("runEvents.jsonl", _set("tenant", ""))
    ),
    "line tenant upper case": Hostile(
        "tenant 'Team' must be", edit_first("agents.jsonl", _set("tenant", "Team"))
    ),
    "line tenant closes a Redis hash tag": Hostile(
        "tenant 'team-a}:blob:Q' must be",
        edit_first("agents.jsonl", _set("tenant", "team-a}:blob:Q")),
    ),
    "line tenant not in the manifest": Hostile(
        "line 1 of runs.jsonl: tenant team-c is not in the manifest",
        edit_first("runs.jsonl", _set("tenant", "team-c")),
    ),
    "document is a string": Hostile(
        "agent must be an object", edit_first("agents.jsonl", _set("agent", "agent-1"))
    ),
    "agent updatedAt yesterday": Hostile(
        "line 1 of agents.jsonl: refused agent 'agent-1' of tenant 'default': "
        "agent.updatedAt must be an integer",
        edit_first("agents.jsonl", _set("agent/updatedAt", "yesterday")),
    ),
    "agent integer agentId": Hostile(
        "agent.agentId must be a non-empty string",
        edit_first("agents.jsonl", _set("agent/agentId", 1)),
    ),
    "agent id with a lone surrogate": Hostile(
        "agent.agentId must not contain NUL or unpaired surrogates",
        edit_first("agents.jsonl", _set("agent/agentId", "\ud800")),
    ),
    "agent not in the manifest": Hostile(
        "agent 'agent-9' of tenant default is not in the manifest's agents",
        edit_first("agents.jsonl", _set("agent/agentId", "agent-9")),
    ),
    "run turnNumber text": Hostile(
        "run.turnNumber must be an integer", edit_first("runs.jsonl", _set("run/turnNumber", "1"))
    ),
    "run with a huge turnNumber": Hostile(
        "run.turnNumber must be an integer",
        edit_first("runs.jsonl", _set("run/turnNumber", 10**30)),
    ),
    "event seq text": Hostile(
        "event.seq must be an integer", edit_first("runEvents.jsonl", _set("event/seq", "1"))
    ),
    "event seq beyond 64 bits": Hostile(
        "event.seq must be an integer",
        edit_first("runEvents.jsonl", _set("event/seq", 2**70)),
    ),
    "events with a gap": Hostile(
        "event 3 of run 'run-1-0' does not follow event 2",
        lambda ms: edit_lines(ms, "runEvents.jsonl", lambda lines: [lines[0], *lines[2:]]),
    ),
    "event offset not its seq": Hostile(
        "event.offset must be the decimal text of its seq",
        edit_first("runEvents.jsonl", _set("event/offset", "01")),
    ),
    "100,000-deep nesting": Hostile(
        "line 1 of runEvents.jsonl is not JSON export writes: nested too deep",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % _deep(100_000))),
    ),
    "nesting deeper than a call may": Hostile(
        "event nests deeper than 128 levels",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % _deep(200))),
    ),
    "non-UTF-8 bytes": Hostile(
        "is not JSON export writes: not UTF-8",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % b'"\xff"')),
    ),
    "raw surrogate bytes": Hostile(
        "not UTF-8", edit_first("runEvents.jsonl", _raw(EVENT_LINE % b'"\xed\xa0\x80"'))
    ),
    "huge integer literal": Hostile(
        "is not JSON export writes: Exceeds the limit",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % (b"1" + b"0" * 5000))),
    ),
    "NaN": Hostile(
        "NaN is not a JSON number", edit_first("runEvents.jsonl", _raw(EVENT_LINE % b"NaN"))
    ),
    "Infinity": Hostile(
        "-Infinity is not a JSON number",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % b"-Infinity")),
    ),
    "a number beyond a double": Hostile(
        "the number 1e999 is out of range",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % b"1e999")),
    ),
    "duplicate keys": Hostile(
        "key 'tenant' appears twice in one object",
        edit_first(
            "runs.jsonl", lambda e: json.dumps(e).replace("{", '{"tenant":"team-b",', 1).encode()
        ),
    ),
    "an empty line": Hostile(
        "line 3 of runs.jsonl is empty",
        lambda ms: edit_lines(ms, "runs.jsonl", lambda lines: [*lines[:2], b"\n", *lines[2:]]),
    ),
    "a last line without its newline": Hostile(
        "does not end with a newline",
        lambda ms: edit_lines(ms, "agents.jsonl", lambda lines: [*lines[:-1], lines[-1][:-1]]),
    ),
    "a line over the request limit": Hostile(
        "line 1 of runEvents.jsonl is longer than the 1500-byte request limit",
        edit_first("runEvents.jsonl", _raw(EVENT_LINE % b'"' + b"x" * 2000 + b'"')),
        import_flags=["--max-request-bytes", "1500"],
    ),
    # -- sizes: a blob over the limit, gzip bombs --
    "a blob over the request limit": Hostile(
        "checkpoint blob 'blob-0' of agent 'agent-1' of tenant default is 100 bytes, over "
        "the 99-byte request limit",
        import_flags=["--max-request-bytes", "99"],
    ),
    "a request limit that is not positive": Hostile(
        "--max-request-bytes must be positive, not 0", import_flags=["--max-request-bytes", "0"]
    ),
    "gzip bomb": Hostile(
        "is 268435456 bytes, over the 134217728-byte request limit",
        big={"checkpoints/default/61/62": 1 << 28},
    ),
    "PAX header bomb": Hostile(
        "an extended tar header of",
        add_after(
            "bridge-store-archive.json",
            member(BLOB, pax_headers={"comment": "x" * 20_000_000}),
            b"x",
        ),
    ),
    "GNU long name bomb": Hostile(
        "an extended tar header of",
        add_after("bridge-store-archive.json", member("checkpoints/" + "a" * 5_000_000), b"x"),
        tar_format=tarfile.GNU_FORMAT,
    ),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_archive_is_one_line_exit_2_and_nothing_written(
    case: str, good_members: Members, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = HOSTILE[case]
    path = tmp_path / "hostile.tar.gz"
    hostile.write(good_members, path)
    target = tmp_path / "target.db"
    store = ["--store", f"sqlite:///{target}"]
    status = main(["import", *store, "--input", str(path), *hostile.import_flags])
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bridge-store: ")
    assert hostile.message in lines[0]
    assert not target.exists()  # the check refused it before the store was opened


def test_the_good_archive_imports(
    good_members: Members, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The archives above differ from this one only by what each case changes."""
    path = tmp_path / "good.tar.gz"
    Hostile("").write(good_members, path)
    store = ["--store", f"sqlite:///{tmp_path / 'target.db'}"]
    assert main(["import", *store, "--input", str(path), "--verify"]) == 0
    assert "verified" in capsys.readouterr().out


def test_an_item_the_store_refuses_stops_the_import_in_one_line(
    good_members: Members, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two events of one run with one idempotency key pass the first pass (keys are
    not kept per run: a run may have millions of events) and are refused by the store:
    one line and exit 2, not "run it again"; no agent of the run is written."""

    def one_key(lines: list[bytes]) -> list[bytes]:
        first, second = (json.loads(line) for line in lines[:2])
        first["event"]["idempotencyKey"] = second["event"]["idempotencyKey"] = "same"
        return [json.dumps(first).encode() + b"\n", json.dumps(second).encode() + b"\n", *lines[2:]]

    path = tmp_path / "keys.tar.gz"
    Hostile("", lambda ms: edit_lines(ms, "runEvents.jsonl", one_key)).write(good_members, path)
    target = tmp_path / "target.db"
    store = ["--store", f"sqlite:///{target}"]
    assert main(["import", *store, "--input", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bridge-store: import stopped: restore: two of run run-1-0's events have one "
        "idempotency key"
    ]
    held = on_stores(routes(store), lambda stores: snapshot(stores, ("default", "team-b")))
    assert not [key for key in held if "/agent/" in key]
