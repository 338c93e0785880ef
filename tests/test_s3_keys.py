"""The bucket layout's encodings keep the contract's list orders in S3's key order."""

from __future__ import annotations

import pytest

from bridge_store.errors import Code, ConnectError
from bridge_store_s3.keys import (
    MAX_KEY_BYTES,
    PAST_REVS,
    Layout,
    checked,
    descending_hex_id,
    descending_int,
    hex_id,
    ordered_int,
    undescending_hex_id,
    unhex_id,
)

# Ids that break naive encodings: shared prefixes, characters below "/" ("-", "."),
# "/" itself, non-ASCII, characters whose UTF-8 bytes sort differently than UTF-16.
TRICKY_IDS = [
    "a",
    "a-b",
    "a.b",
    "a/b",
    "a0",
    "aa",
    "ab",
    "b",
    "B",
    "agent-32faf2c2-550d-460d-a73c-a14aef145273",
    "é",
    "日本",
    "\U0001f680",
    "\uffff",
    " ",
    "~",
    "a\x00",
]
INTEGERS = [-(2**53), -1000, -1, 0, 1, 9, 10, 999, 1795994234137, 2**53]


def utf8_order(value: str) -> bytes:
    return value.encode()


def test_hex_ids_round_trip_and_never_contain_a_slash() -> None:
    for value in TRICKY_IDS:
        assert unhex_id(hex_id(value)) == value
        assert undescending_hex_id(descending_hex_id(value)) == value
        assert "/" not in hex_id(value)
        assert "/" not in descending_hex_id(value)


def test_ascending_id_segments_sort_like_the_ids() -> None:
    # Tuples (id, rest) compare id first: "/" ending an id must sort below any hex digit.
    pairs = [(left, right) for left in TRICKY_IDS for right in ("x", "y")]
    by_key = sorted(pairs, key=lambda pair: f"{hex_id(pair[0])}/{hex_id(pair[1])}")
    assert by_key == sorted(pairs)


def test_descending_id_segments_sort_like_the_ids_reversed() -> None:
    pairs = [(left, rev) for left in TRICKY_IDS for rev in ("0a", "ff")]
    by_key = sorted(pairs, key=lambda pair: descending_hex_id(pair[0]) + pair[1])
    assert [left for left, _ in by_key] == [
        left for left, _ in sorted(pairs, key=lambda pair: pair[0], reverse=True)
    ]


def test_python_string_order_is_utf8_byte_order() -> None:
    # What S3 sorts by (UTF-8 bytes) and what the contract sorts by (str) agree.
    assert sorted(TRICKY_IDS) == sorted(TRICKY_IDS, key=utf8_order)


def test_integers_sort_as_numbers_both_ways() -> None:
    assert sorted(INTEGERS, key=ordered_int) == sorted(INTEGERS)
    assert sorted(INTEGERS, key=descending_int) == sorted(INTEGERS, reverse=True)
    assert {len(ordered_int(n)) for n in INTEGERS} == {17}
    assert len({ordered_int(n) for n in INTEGERS}) == len(INTEGERS)


def test_agent_positions_sort_in_list_order() -> None:
    agents = [(updated, agent) for updated in (5, 1000, 1001) for agent in TRICKY_IDS]
    by_key = sorted(agents, key=lambda pair: Layout.agent_position(*pair))
    assert by_key == sorted(agents, reverse=True)


def test_past_revs_skips_every_rev_of_one_position_and_nothing_else() -> None:
    position = Layout.agent_position(1000, "a")
    bound = position + PAST_REVS
    assert position + "0123456789abcdef" < bound
    # Same updatedAt, descending ids: "aa" comes before "a" in list order, "A" after.
    assert Layout.agent_position(1000, "aa") + "ff" < bound
    assert Layout.agent_position(1000, "A") + "00" > bound


def test_keys_live_under_the_prefix_and_respect_the_length_limit() -> None:
    layout = Layout("team/prod/")
    assert layout.agent_doc("a") == "team/prod/agents/doc/61"
    assert layout.event("r", 12) == "team/prod/events/72/e/0000000000000012"
    assert layout.claim("r", "k") == "team/prod/events/72/k/6b"
    assert layout.blob("a", "b") == "team/prod/ckpt/blob/61/62"
    assert layout.run_doc("a", "r") == "team/prod/runs/doc/72/61"
    assert checked("x" * MAX_KEY_BYTES) == "x" * MAX_KEY_BYTES
    with pytest.raises(ConnectError) as caught:
        layout.agent_doc("a" * 600)
    assert caught.value.code == Code.INVALID_ARGUMENT


def test_tenant_default_keeps_the_prefix_and_others_get_their_own() -> None:
    layout = Layout("team/")
    assert layout.of_tenant("default") is layout
    assert layout.agent_doc("a") == "team/agents/doc/61"
    other = layout.of_tenant("team-b")
    assert other.agent_doc("a") == "team/tenants/team-b/agents/doc/61"
    # Default's listings never reach another tenant's keys.
    for prefix in (layout.agents_docs(), layout.runs_docs(), layout.all_events(), layout.blobs()):
        assert not other.agent_doc("a").startswith(prefix)
        assert not other.blob("a", "b").startswith(prefix)
