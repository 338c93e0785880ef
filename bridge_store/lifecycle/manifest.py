"""An archive's manifest, read and checked whole before anything it names is trusted.

docs/archive.md describes it. Every field an import uses is checked for its type and
range here, so the rest of the import reads typed values, never a ``KeyError`` or a
``TypeError`` out of a hostile file: tenant names by the tenant rule, agent ids by
the contract's id rules, counts as integers, digests as SHA-256 hex. Fields it does
not know are ignored, as the format allows within a version.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from bridge_store.backend.substores import SUBSTORE_NAMES, SubstoreName
from bridge_store.backend.tenants import is_valid_tenant
from bridge_store.errors import ConnectError
from bridge_store.wire.fields import MAX_SAFE_INTEGER, require_id

from .archive import FORMAT, LINE_MEMBERS, VERSION, ArchiveError, loads_strict, shown

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class MemberDigest:
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class Manifest:
    #: Per tenant exported, its items per substore.
    tenants: dict[str, dict[SubstoreName, int]]
    #: SHA-256 and size of each JSON-lines member.
    members: dict[str, MemberDigest]
    #: (tenant, agentId) -> the agent's digest (``bridge_store.lifecycle.verify``).
    agents: dict[tuple[str, str], bytes]


def parse_manifest(data: bytes) -> Manifest:
    """The manifest in ``data``; :class:`ArchiveError` naming what is wrong with it."""
    try:
        value = loads_strict(data)
    except ValueError as error:
        raise ArchiveError(f"the manifest is not JSON export writes: {error}") from None
    problem = _Problem()
    top = problem.object(value, "manifest")
    if top.get("format") != FORMAT or top.get("version") != VERSION:
        raise ArchiveError(
            f"the manifest is of format {shown(top.get('format'))} version "
            f"{shown(top.get('version'))}: this bridge-store reads {FORMAT} version {VERSION}"
        )
    tenants = {
        problem.tenant(name): _counts(problem, counts, f"manifest.tenants[{shown(name)}]")
        for name, counts in problem.object(top.get("tenants"), "manifest.tenants").items()
    }
    members = problem.object(top.get("members"), "manifest.members")
    expected = [name for name, _, _ in LINE_MEMBERS]
    listed = sorted(set(members) - set(expected))
    if listed:
        raise ArchiveError(f"the manifest lists members the archive does not hold: {shown(listed)}")
    digests = {
        name: _member(problem, members.get(name), f"manifest.members[{name!r}]")
        for name in expected
    }
    return Manifest(tenants, digests, _agents(problem, top.get("agents"), tenants))


def _counts(problem: _Problem, value: Any, field: str) -> dict[SubstoreName, int]:
    counts = problem.object(value, field)
    return {name: problem.count(counts.get(name), f"{field}.{name}") for name in SUBSTORE_NAMES}


def _member(problem: _Problem, value: Any, field: str) -> MemberDigest:
    member = problem.object(value, field)
    return MemberDigest(
        sha256=problem.sha256(member.get("sha256"), f"{field}.sha256"),
        size=problem.count(member.get("size"), f"{field}.size"),
    )


def _agents(
    problem: _Problem, value: Any, tenants: Mapping[str, Mapping[SubstoreName, int]]
) -> dict[tuple[str, str], bytes]:
    if not isinstance(value, list):
        problem.fail("manifest.agents must be a list")
    agents: dict[tuple[str, str], bytes] = {}
    for index, raw in enumerate(value):
        field = f"manifest.agents[{index}]"
        entry = problem.object(raw, field)
        tenant = entry.get("tenant")
        if not isinstance(tenant, str) or tenant not in tenants:
            problem.fail(f"{field}.tenant {shown(tenant)} is not a tenant the manifest lists")
        try:
            agent_id = require_id(entry, "agentId", field)
        except ConnectError as error:
            problem.fail(error.message)
        key = (tenant, agent_id)
        if key in agents:
            problem.fail(f"{field} lists agent {shown(agent_id)} of tenant {tenant} again")
        agents[key] = bytes.fromhex(problem.sha256(entry.get("sha256"), f"{field}.sha256"))
    per_tenant = Counter(tenant for tenant, _ in agents)
    for tenant, counts in tenants.items():
        listed = per_tenant[tenant]
        if listed != counts["agents"]:
            problem.fail(
                f"manifest.agents lists {listed} agents of tenant {tenant}; "
                f"manifest.tenants counts {counts['agents']}"
            )
    return agents


class _Problem:
    """Readers of typed fields that raise :class:`ArchiveError` naming the field."""

    @staticmethod
    def fail(message: str) -> NoReturn:
        raise ArchiveError(f"the manifest is malformed: {message}")

    def object(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"{field} must be an object, not {type(value).__name__}")
        return value

    def tenant(self, name: str) -> str:
        if not is_valid_tenant(name):
            self.fail(f"manifest.tenants: {shown(name)} is not a tenant name")
        return name

    def count(self, value: Any, field: str) -> int:
        counts = isinstance(value, int) and not isinstance(value, bool)
        if not counts or not 0 <= value <= MAX_SAFE_INTEGER:
            self.fail(f"{field} must be a count (an integer from 0), not {shown(value)}")
        return int(value)

    def sha256(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or _SHA256.fullmatch(value) is None:
            self.fail(f"{field} must be a SHA-256 in lowercase hex, not {shown(value)}")
        return value
