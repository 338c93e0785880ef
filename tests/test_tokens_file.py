"""The tokens file: what it accepts, and how add and revoke rewrite it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from bridge_store.errors import ConfigurationError
from bridge_store.security.auth import Scope, token_digest
from bridge_store.security.tokens_file import add_token, load_entries, parse_entries, revoke_token

GOOD = """
[[token]]
name = "alice-laptop"
sha256 = "{digest}"
tenant = "team-a"
scope = "write"
"""


def good(token: str = "a-token-for-alice") -> str:  # noqa: S107 - a test value
    return GOOD.format(digest=token_digest(token).hex())


def test_the_issue_s_example_parses() -> None:
    [entry] = parse_entries(good(), "tokens.toml")
    assert (entry.name, entry.tenant, entry.scope) == ("alice-laptop", "team-a", Scope.WRITE)
    assert entry.sha256 == token_digest("a-token-for-alice")


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (('scope = "write"', 'scope = "root"'), "scope must be one of read, write, admin"),
        (('tenant = "team-a"', 'tenant = "Team A"'), "tenant must be"),
        (('name = "alice-laptop"', 'name = "alice laptop"'), "name must be"),
        (('name = "alice-laptop"', 'name = "a"\nextra = 1'), "unknown keys ['extra']"),
        (("sha256 = ", "sha256 = 'zz' #"), "sha256 must be 64 hex digits"),
        (("[[token]]", "[token"), "is not valid TOML"),
    ],
)
def test_mistakes_are_named(change: tuple[str, str], complaint: str) -> None:
    with pytest.raises(ConfigurationError, match=r"tokens\.toml") as raised:
        parse_entries(good().replace(*change), "tokens.toml")
    assert complaint in str(raised.value)


def test_names_and_digests_are_unique() -> None:
    twice = good() + good("another-token-entirely").replace("alice-laptop", "alice-laptop")
    with pytest.raises(ConfigurationError, match="two tokens are named 'alice-laptop'"):
        parse_entries(twice, "f")
    same_digest = good() + good().replace("alice-laptop", "bob")
    with pytest.raises(ConfigurationError, match="repeats another's sha256"):
        parse_entries(same_digest, "f")


def test_add_appends_a_private_file_holding_digests_only(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    first = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    second = add_token(path, "viewer", tenant="team-a", scope=Scope.READ)
    assert first != second
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert first not in text
    assert second not in text
    assert [(e.name, e.sha256) for e in load_entries(path)] == [
        ("alice", token_digest(first)),
        ("viewer", token_digest(second)),
    ]
    with pytest.raises(ConfigurationError, match="two tokens are named 'alice'"):
        add_token(path, "alice", tenant="team-b", scope=Scope.ADMIN)


def test_revoke_removes_one_entry(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    add_token(path, "bob", tenant="team-b", scope=Scope.ADMIN)
    revoke_token(path, "alice")
    assert [e.name for e in load_entries(path)] == ["bob"]
    with pytest.raises(ConfigurationError, match="no token named 'alice'"):
        revoke_token(path, "alice")
