"""Whatever tenant name and ids a caller passes, the Redis and S3 layouts give distinct
(tenant, substore, id) tuples distinct keys, and no name ends a Redis hash tag early
(issue 21: tenant ``team-a}:blob:Q`` wrote a key team-a read as one of its blobs).
Names that follow the tenant rule keep the keys they had."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.tenants import TENANT_PATTERN
from bridge_store.stack.stores import Routes, open_stores
from bridge_store.wire.fields import is_storable_key
from bridge_store_redis.keys import KeySpace, tenant_of_part, terminated, utf8
from bridge_store_s3.keys import Layout, tenant_of_segment, tenant_segment

#: Fixed examples (tests are deterministic); ``--hypothesis-profile=fuzz-long`` does not
#: apply here, these run in a few seconds.
FIXED = settings.get_profile("fuzz")
PREFIX = "team"
#: What a hostile name or id would hold: tag and key delimiters, glob characters, the
#: escape characters of both layouts, NUL, a lone surrogate.
TRICKY = "}{@#!~:*?[]\\/\x00\ud800aZ0-_.é"
texts = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(), max_size=12)
tenants = st.sampled_from(["default", "team-a", "team-a}:blob:Q", "", "Team", "~74"]) | texts
valid_tenants = st.from_regex(TENANT_PATTERN, fullmatch=True)

ROW_INDEXES = {"agents": ("updated", "cwd"), "runs": ("turn", "agent", "run")}
kinds = st.one_of(
    st.tuples(st.sampled_from(["docs", "members"]), st.sampled_from(sorted(ROW_INDEXES))),
    st.tuples(st.just("index"), st.sampled_from(["agents:0", "agents:1", "runs:0", "runs:2"])),
    st.tuples(st.just("blob"), texts, texts),
    st.tuples(st.just("blob-index"), st.sampled_from(["blob", "agent"])),
    st.tuples(st.sampled_from(["log", "keys"]), texts),
    st.tuples(st.just("runs")),
)


def redis_key(root: KeySpace, tenant: str, kind: tuple[Any, ...]) -> bytes:
    keys = root.of_tenant(tenant)
    name = kind[0]
    if name in ("docs", "members"):
        return utf8(getattr(keys.table(kind[1], ROW_INDEXES[kind[1]]), name))
    if name == "index":
        substore, number = kind[1].split(":")
        return utf8(keys.table(substore, ROW_INDEXES[substore]).indexes[int(number)])
    if name == "blob":
        agent_id, blob_id = kind[1], kind[2]
        # The field as checkpoints.py makes it.
        return keys.blob(agent_id, terminated(blob_id) + utf8(agent_id))
    if name == "blob-index":
        return utf8(keys.blob_index(kind[1]))
    if name == "log":
        return keys.event_log(kind[1])
    if name == "keys":
        return keys.event_keys(kind[1])
    return utf8(keys.event_runs())


def hash_tag(key: bytes) -> bytes:
    """What Redis Cluster hashes: between the first ``{`` and the first ``}`` after it."""
    start = key.index(b"{")
    return key[start + 1 : key.index(b"}", start + 1)]


def read_tag(tag: bytes) -> tuple[str, str, bytes | None]:
    """(substore, tenant, owner) a hash tag names, read back without the layout's code."""
    text = tag.decode("utf-8", "surrogatepass").removeprefix(f"{PREFIX}:")
    for separator in ("@", "#", "!"):
        if separator in text:
            substore, rest = text.split(separator, 1)
            break
    else:
        return text, "default", None
    if separator == "@":
        return substore, tenant_of_part(rest), None
    part, owner = rest.split(separator, 1)
    raw = utf8(owner) if separator == "#" else bytes.fromhex(owner)
    return substore, tenant_of_part(part), raw


@settings(FIXED, max_examples=300)
@given(st.lists(st.tuples(tenants, kinds), unique=True, max_size=25), st.booleans())
# Issue 21's: the old layout gave both one key.
@example([("team-a}:blob:Q", ("blob", "a", "X")), ("team-a", ("blob", "a", "Q}:blob:X"))], False)
# Tenant and run id meeting at the cluster layout's separator.
@example([("a#b", ("log", "c")), ("a", ("log", "b#c"))], True)
def test_redis_distinct_tuples_never_share_a_key(
    tuples: list[tuple[str, tuple[Any, ...]]], spread: bool
) -> None:
    root = KeySpace(PREFIX, spread=spread)
    keys: dict[bytes, tuple[str, tuple[Any, ...]]] = {}
    for tenant, kind in tuples:
        if spread and kind[0] == "runs":
            continue  # the cluster layout has no registry of runs
        key = redis_key(root, tenant, kind)
        assert keys.setdefault(key, (tenant, kind)) == (tenant, kind), key


@settings(FIXED, max_examples=300)
@given(tenants, kinds, st.booleans())
def test_redis_no_name_ends_a_hash_tag_early(
    tenant: str, kind: tuple[Any, ...], spread: bool
) -> None:
    if spread and kind[0] == "runs":
        return
    key = redis_key(KeySpace(PREFIX, spread=spread), tenant, kind)
    substore, of_tenant, owner = read_tag(hash_tag(key))
    # The whole tenant name (and, in the cluster layout, the whole run or agent id) is
    # inside the tag Redis hashes: read back from it, it is what was passed.
    assert of_tenant == tenant
    assert key.startswith(b"{" + hash_tag(key) + b"}")
    if owner is not None:
        if kind[0] == "blob":
            assert (substore, owner) == ("checkpoints", terminated(kind[1]))
        else:
            assert (substore, owner) == ("runEvents", utf8(kind[1]))


@settings(FIXED, max_examples=200)
@given(valid_tenants, st.text(alphabet=st.characters(exclude_characters="}"), max_size=12))
def test_redis_valid_names_and_ids_keep_their_keys(tenant: str, run_id: str) -> None:
    """Every name the server ever took follows the rule: no key of a store changes."""
    plain, spread = KeySpace(PREFIX).of_tenant(tenant), KeySpace(PREFIX, spread=True)
    if tenant == "default":
        assert plain.tag("agents") == "{team:agents}"
    else:
        assert plain.tag("agents") == f"{{team:agents@{tenant}}}"
    assert spread.of_tenant(tenant).event_log(run_id) == utf8(
        f"{{team:runEvents#{tenant}#{run_id}}}:log"
    )


S3_KINDS = {
    "agent_doc": 1,
    "run_doc": 2,
    "event": 1,
    "claim": 2,
    "blob": 2,
    "blob_order_of_id": 1,
    "runs_of_agent": 1,
    "agents_of_cwd": 1,
}
#: Ids as the contract lets them through to a backend (non-empty, no NUL or lone
#: surrogate).
storable_ids = texts.filter(lambda text: bool(text) and is_storable_key(text))
s3_kinds = st.sampled_from(sorted(S3_KINDS)).flatmap(
    lambda name: st.tuples(st.just(name), st.lists(storable_ids, min_size=2, max_size=2))
)


def s3_key(root: Layout, tenant: str, kind: tuple[str, list[str]]) -> str:
    layout = root.of_tenant(tenant)
    name, ids = kind
    if name == "event":
        return layout.event(ids[0], 7)
    method = getattr(layout, name)
    return str(method(*ids[: S3_KINDS[name]]))


@settings(FIXED, max_examples=300)
@given(st.lists(st.tuples(tenants, s3_kinds), max_size=25))
def test_s3_distinct_tuples_never_share_a_key_or_a_tenant_prefix(
    tuples: list[tuple[str, tuple[str, list[str]]]],
) -> None:
    root = Layout("team/")
    keys: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for tenant, (name, ids) in tuples:
        used = (tenant, name, tuple(ids[: S3_KINDS[name]]))
        key = s3_key(root, tenant, (name, ids))  # ids of 12 characters fit any key
        assert keys.setdefault(key, used) == used, key
        prefix = root.of_tenant(tenant).prefix
        assert key.startswith(prefix)
        if tenant != "default":
            # One segment of its own: no other tenant's prefix holds this one's keys.
            assert "/" not in tenant_segment(tenant)
            assert tenant_of_segment(tenant_segment(tenant)) == tenant
        else:
            assert not key.startswith("team/tenants/")


@settings(FIXED, max_examples=100)
@given(valid_tenants)
def test_s3_valid_names_keep_their_prefix(tenant: str) -> None:
    if tenant != "default":
        assert Layout("team/").of_tenant(tenant).prefix == f"team/tenants/{tenant}/"


HOSTILE_TENANT = "team-a}:blob:Q"


async def _hostile_blob_is_not_team_as(url: str, team_a_blob_id: str) -> None:
    """Through the backend API (what an unchecked import called): the hostile tenant
    writes blob X of agent a; team-a must not read it as any blob of its own."""
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        checkpoints = opened.stores.checkpoints
        await checkpoints.create(HOSTILE_TENANT, "a", "X", b"planted")
        assert await checkpoints.get(HOSTILE_TENANT, "a", "X") == b"planted"
        assert await checkpoints.get("team-a", "a", team_a_blob_id) is None
        assert (
            await checkpoints.list("team-a", agent_ids=None, blob_ids=None, after=None, limit=10)
            == []
        )
        assert "team-a" not in await checkpoints.tenants()
        assert HOSTILE_TENANT in await checkpoints.tenants()
    finally:
        await opened.close()


@pytest.mark.redis
async def test_redis_a_hostile_tenant_name_writes_no_key_another_tenant_reads(
    make_redis_url: Any,
) -> None:
    # The key the old layout gave the hostile blob was team-a's blob "Q}:blob:X".
    await _hostile_blob_is_not_team_as(make_redis_url(), "Q}:blob:X")


@pytest.mark.s3
async def test_s3_a_hostile_tenant_name_writes_no_key_another_tenant_reads(
    make_s3_url: Any,
) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single(make_s3_url()), migrate=True)
    try:
        checkpoints = opened.stores.checkpoints
        # The old layout put this tenant's blobs inside team-a's blob listing.
        await checkpoints.create("team-a/ckpt/blob/61", "a", "X", b"planted")
        assert (
            await checkpoints.list("team-a", agent_ids=None, blob_ids=None, after=None, limit=10)
            == []
        )
        assert set(await checkpoints.tenants()) == {"team-a/ckpt/blob/61"}
    finally:
        await opened.close()


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_sql_and_memory_keep_a_hostile_tenant_apart(
    kind: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """SQL stores the tenant as a bound column value, the memory backend as a dict key:
    any two names are two tenants, with nothing to escape."""
    if kind == "memory":
        url = "memory://"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("make_postgres_url")()
    await _hostile_blob_is_not_team_as(url, "Q}:blob:X")
