"""The byte encodings behind the Redis indexes sort exactly like the contract's order."""

from __future__ import annotations

import fnmatch
import random

import pytest
from redis.crc import key_slot

from bridge_store.backend.substores import SUBSTORE_NAMES
from bridge_store_redis.keys import (
    TOP,
    KeySpace,
    sortable_int,
    split_terminated,
    terminated,
    utf8,
)

TRICKY = [
    "",
    "a",
    "ab",
    "a\x00",
    "a\x00b",
    "a\x01",
    "\x00",
    "\x00\x00",
    "é",
    "日本",
    "🚀",
    "\ud800",
]


def random_text(rng: random.Random) -> str:
    alphabet = ["\x00", "\x01", "a", "b", "\x7f", "é", "日", "🚀", "\uffff"]
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(4)))


def test_sortable_int_orders_like_numbers() -> None:
    numbers = [-(2**53), -1000, -1, 0, 1, 2, 255, 256, 2**31, 2**53]
    encoded = [sortable_int(n) for n in numbers]
    assert encoded == sorted(encoded)
    assert {len(e) for e in encoded} == {16}


def test_terminated_keeps_order_and_is_prefix_free() -> None:
    rng = random.Random(7)
    texts = TRICKY + [random_text(rng) for _ in range(300)]
    for left in texts:
        for right in texts[:60]:
            assert (terminated(left) < terminated(right)) == (left < right), (left, right)
            if left != right:
                assert not terminated(right).startswith(terminated(left)), (left, right)


def test_composite_members_sort_like_tuples() -> None:
    # A (string, int, string) key as the runs' by-run index encodes it.
    rng = random.Random(11)
    rows = [(random_text(rng), rng.randrange(-5, 5), random_text(rng)) for _ in range(400)]
    members = {terminated(a) + sortable_int(n) + utf8(b): (a, n, b) for a, n, b in rows}
    assert [members[m] for m in sorted(members)] == sorted(set(rows))


def test_split_terminated_inverts_terminated() -> None:
    for text in TRICKY:
        assert split_terminated(terminated(text) + b"rest\x00") == (text, b"rest\x00")


def test_top_sorts_above_every_utf8_byte() -> None:
    # So prefix + TOP bounds every member that starts with prefix.
    every_char = "".join(chr(code) for code in range(0x110000))
    assert max(utf8(every_char)) < TOP[0]


def test_each_substore_of_a_prefix_is_one_cluster_slot() -> None:
    keys = KeySpace("team-a")
    for substore in ("agents", "runs"):
        table = keys.table(substore, ("x", "y"))
        assert len({key_slot(utf8(key)) for key in table.all()}) == 1
    blobs = [utf8(keys.blob_index("blob")), utf8(keys.blob_index("agent"))]
    blobs += [keys.blob("agent-{2}", terminated(blob) + utf8("agent-{2}")) for blob in TRICKY]
    assert len({key_slot(key) for key in blobs}) == 1
    events = [utf8(keys.event_runs()), keys.event_log("run-{1}"), keys.event_keys("日本")]
    assert len({key_slot(key) for key in events}) == 1
    # Four substores, four tags: a cluster can put them on different shards.
    assert len({keys.tag(name) for name in SUBSTORE_NAMES}) == 4


@pytest.mark.parametrize("prefix", ["a", "team-a", "a:b"])
def test_patterns_match_only_their_own_prefix(prefix: str) -> None:
    own = KeySpace(prefix).table("agents", ("updated",)).docs
    longer = KeySpace(prefix + ":x").table("agents", ("updated",)).docs
    patterns = KeySpace(prefix).patterns()
    assert any(fnmatch.fnmatchcase(own, pattern) for pattern in patterns)
    assert not any(fnmatch.fnmatchcase(longer, pattern) for pattern in patterns)


def test_tenant_default_keeps_the_pre_tenant_layout() -> None:
    keys = KeySpace("team")
    assert keys.of_tenant("default") == keys
    assert keys.table("agents", ("updated",)).docs == "{team:agents}:docs"
    assert keys.event_log("r") == b"{team:runEvents}:log:r"
    other = keys.of_tenant("team-b")
    assert other.table("agents", ("updated",)).docs == "{team:agents@team-b}:docs"
    assert other.blob("a", b"x") == b"{team:checkpoints@team-b}:blob:x"


def test_each_tenants_substore_is_one_slot_and_its_own_tag() -> None:
    keys = KeySpace("team").of_tenant("team-b")
    table = keys.table("runs", ("turn", "agent", "run"))
    assert len({key_slot(utf8(key)) for key in table.all()}) == 1
    events = [utf8(keys.event_runs()), keys.event_log("r"), keys.event_keys("r")]
    assert len({key_slot(key) for key in events}) == 1
    tags = {KeySpace("team").of_tenant(tenant).tag("runs") for tenant in ("default", "a", "b")}
    assert len(tags) == 3


def test_patterns_match_every_tenant_and_tenant_of_reads_it_back() -> None:
    keys = KeySpace("team")
    docs = keys.of_tenant("team-b").table("agents", ("updated",)).docs
    assert any(fnmatch.fnmatchcase(docs, pattern) for pattern in keys.patterns())
    assert fnmatch.fnmatchcase(docs, keys.tenant_pattern("agents", ":docs"))
    assert not fnmatch.fnmatchcase("{team:agents}:docs", keys.tenant_pattern("agents", ":docs"))
    assert keys.tenant_of(utf8(docs), "agents") == "team-b"


def test_the_cluster_layout_gives_each_run_and_each_agent_a_slot_of_its_own() -> None:
    """Runs' logs and agents' blobs spread over slots; each one's keys share one."""
    keys = KeySpace("team", spread=True).of_tenant("team-b")
    assert keys.spread
    runs = [f"run-{n}" for n in range(50)] + ["run-{1}", "a}b", "日本"]
    slots = set()
    for run in runs:
        own = {key_slot(keys.event_log(run)), key_slot(keys.event_keys(run))}
        assert len(own) == 1
        slots |= own
    assert len(slots) > 40
    blobs = {key_slot(keys.blob(f"agent-{n}", b"field")) for n in range(50)}
    assert len(blobs) > 40
    for agent in ("agent-{2}", "a}b", "a\x00b"):
        assert len({key_slot(keys.blob(agent, terminated(b) + utf8(agent))) for b in TRICKY}) == 1
    # The rows and indexes keep their substore's tag (their orderings are global).
    assert keys.table("agents", ("updated",)).docs == "{team:agents@team-b}:docs"
    assert keys.blob_index("blob") == "{team:checkpoints@team-b}:by-blob"


def test_cluster_layout_keys_are_distinct_and_found_by_the_prefix_patterns() -> None:
    keys = KeySpace("team", spread=True)
    assert keys.event_log("r") == b"{team:runEvents#default#r}:log"
    pairs = [("a", "b}:blob:x"), ("a}:blob:b", "x"), ("a\x00", "b"), ("a", "\x00b")]
    names = {keys.blob(agent, terminated(blob) + utf8(agent)) for agent, blob in pairs}
    assert len(names) == len(pairs)
    assert len({keys.event_log(r) for r in ("a}:keys", "a")} | {keys.event_keys("a")}) == 3
    other = KeySpace("team:runEvents", spread=True)
    for key in (keys.event_log("r"), keys.blob("a", b"f"), keys.of_tenant("t").event_keys("r")):
        text = key.decode()
        assert any(fnmatch.fnmatchcase(text, pattern) for pattern in keys.patterns())
        assert not any(fnmatch.fnmatchcase(text, pattern) for pattern in other.patterns())
    tenant = keys.of_tenant("t")
    patterns = tenant.event_logs_patterns()
    assert any(fnmatch.fnmatchcase(tenant.event_log("x").decode(), p) for p in patterns)
    assert not any(fnmatch.fnmatchcase(keys.event_log("x").decode(), p) for p in patterns)
