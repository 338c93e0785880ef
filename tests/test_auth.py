"""Principals, scopes and the token registry: constant-time lookup, reloads, tenants."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.tenants import DEFAULT_TENANT, check_tenant, is_valid_tenant
from bridge_store.security.auth import Principal, Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.security.tokens_file import add_token, load_entries, revoke_token


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def entry(name: str, token: str, tenant: str = "team-a", scope: Scope = Scope.WRITE) -> TokenEntry:
    return TokenEntry(name=name, sha256=token_digest(token), tenant=tenant, scope=scope)


def test_scopes_include_the_ones_before() -> None:
    assert Scope.ADMIN.allows(Scope.WRITE)
    assert Scope.ADMIN.allows(Scope.READ)
    assert Scope.WRITE.allows(Scope.READ)
    assert not Scope.WRITE.allows(Scope.ADMIN)
    assert not Scope.READ.allows(Scope.WRITE)
    assert Scope.OPERATOR.allows(Scope.ADMIN)
    assert not Scope.ADMIN.allows(Scope.OPERATOR)


@pytest.mark.parametrize("name", ["default", "team-a", "a", "t_1", "x" * 63])
def test_valid_tenants(name: str) -> None:
    assert check_tenant(name) == name


@pytest.mark.parametrize(
    "name", ["", "Team", "-a", "a b", "a/b", "a:b", "a@b", "{a}", "a*", "é", "x" * 64]
)
def test_tenants_that_are_not_safe_everywhere_are_refused(name: str) -> None:
    assert not is_valid_tenant(name)
    with pytest.raises(ValueError, match="tenant"):
        check_tenant(name)


def test_resolve_finds_each_token_and_nothing_else() -> None:
    registry = TokenRegistry(
        [entry("alice", "token-of-alice-000"), entry("bob", "token-of-bob-00000", "team-b")]
    )
    assert registry.resolve(b"token-of-alice-000") == Principal("alice", "team-a", Scope.WRITE)
    assert registry.resolve(b"token-of-bob-00000") == Principal("bob", "team-b", Scope.WRITE)
    assert registry.resolve(b"token-of-alice-00") is None
    assert registry.resolve(b"") is None


def test_resolve_looks_up_the_digest_of_what_was_presented(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = [entry(f"t{n}", f"token-number-{n:06d}") for n in range(20_000)]
    registry = TokenRegistry(entries)
    digested: list[bytes] = []
    real = hashlib.sha256

    def sha256(data: bytes) -> Any:
        digested.append(data)
        return real(data)

    # One digest a call and no comparison with each entry: 20,000 tokens cost a call
    # what one does (it was 787 us a call, against 0.6 us).
    monkeypatch.setattr(hashlib, "sha256", sha256)
    monkeypatch.setattr(hmac, "compare_digest", _no_scan)
    for n in (0, 12_345, 19_999):
        found = registry.resolve(f"token-number-{n:06d}".encode())
        assert found == Principal(f"t{n}", "team-a", Scope.WRITE)
    assert registry.resolve(b"token-number-020000") is None
    assert digested == [f"token-number-{n:06d}".encode() for n in (0, 12_345, 19_999, 20_000)]


def test_a_token_listed_twice_resolves_to_its_later_entry() -> None:
    registry = TokenRegistry(
        [entry("old", "the-same-token-000"), entry("new", "the-same-token-000", "team-b")]
    )
    assert registry.resolve(b"the-same-token-000") == Principal("new", "team-b", Scope.WRITE)


def _no_scan(a: bytes, b: bytes) -> bool:
    raise AssertionError("a presented token is looked up, not compared with every entry")


def test_the_one_token_shorthand_is_an_operator_of_tenant_default() -> None:
    registry = TokenRegistry.single("the-one-shared-token")
    principal = registry.resolve(b"the-one-shared-token")
    assert principal is not None
    assert (principal.tenant, principal.scope) == (DEFAULT_TENANT, Scope.OPERATOR)
    assert registry.path is None
    assert not registry.reload()


def registry_of(path: Path, clock: Clock) -> TokenRegistry:
    return TokenRegistry(load_entries(path), path=path, loader=load_entries, clock=clock)


def test_a_changed_file_is_read_at_the_first_call_a_second_later(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    clock = Clock()
    registry = registry_of(path, clock)
    assert registry.resolve(alice.encode()) is not None
    revoke_token(path, "alice")
    bob = add_token(path, "bob", tenant="team-b", scope=Scope.READ)
    clock.now += 0.5  # checked at most once a second: not yet
    assert registry.resolve(alice.encode()) is not None
    clock.now += 0.6
    assert registry.resolve(alice.encode()) is None
    assert registry.resolve(bob.encode()) == Principal("bob", "team-b", Scope.READ)


def test_a_file_that_fails_to_parse_keeps_the_previous_tokens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    good = path.read_text()
    clock = Clock()
    registry = registry_of(path, clock)
    path.write_text(good.replace('scope = "write"', 'scope = "root"'))
    clock.now += 2
    with caplog.at_level(logging.ERROR, logger="bridge_store.security.auth"):
        assert registry.resolve(alice.encode()) is not None
    [record] = caplog.records
    assert "previous tokens stay" in record.getMessage()
    assert "scope must be one of read, write, admin" in record.getMessage()
    digest = token_digest(alice).hex()
    assert alice not in caplog.text
    assert digest not in caplog.text
    # Logged once per change, not at every call.
    clock.now += 2
    registry.resolve(alice.encode())
    assert len(caplog.records) == 1


def test_reload_reads_the_file_at_once_as_sighup_does(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    registry = registry_of(path, Clock())  # the clock never moves
    revoke_token(path, "alice")
    assert registry.reload()
    assert registry.resolve(alice.encode()) is None


def test_a_rewrite_within_the_same_mtime_is_still_noticed(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    clock = Clock()
    registry = registry_of(path, clock)
    stamp = os.stat(path).st_mtime_ns
    bob = add_token(path, "bob", tenant="team-a", scope=Scope.WRITE)
    os.utime(path, ns=(stamp, stamp))  # same mtime; size and inode differ
    clock.now += 1.5
    assert registry.resolve(bob.encode()) is not None
