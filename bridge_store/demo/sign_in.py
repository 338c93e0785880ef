"""The demo's tokens: one named token per person of the sample team, and a file per tenant
whose token signs in to the viewer as that tenant's first person.

The tokens file (SHA-256 digests, as ``token add`` writes it) is written afresh on
every start. The sign-in files are made once (mode 0600) and read on later starts, so
a browser signed in stays signed in; the other people's tokens are new each time and
kept nowhere: they only name who created what.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..security.auth import Scope, TokenEntry, token_digest
from ..security.tokens import load_or_generate, new_token, write_private
from ..security.tokens_file import render
from .team import PEOPLE


@dataclass(frozen=True, slots=True)
class SignIn:
    """Whose token a file holds: a person (the token's name) of a tenant."""

    name: str
    tenant: str
    token_file: Path


def sign_in_file(first: Path, tenant: str, index: int) -> Path:
    """The first tenant's file is ``first`` (``demo.token``); the others are named after
    their tenant beside it (``demo.platform.token``)."""
    if index == 0:
        return first
    return first.with_name(f"{first.stem}.{tenant}{first.suffix}")


def write_tokens(tokens_file: Path, first_sign_in: Path) -> list[SignIn]:
    """Write the tokens file; the sign-in files, one per tenant, the first tenant's first."""
    entries: list[TokenEntry] = []
    sign_ins: list[SignIn] = []
    for person, tenant in PEOPLE.items():
        if tenant in (sign_in.tenant for sign_in in sign_ins):
            token = new_token()
        else:
            path = sign_in_file(first_sign_in, tenant, len(sign_ins))
            # The environment's token is serve's shorthand, not a person's: not read.
            token = load_or_generate(str(path), {}).value
            sign_ins.append(SignIn(person, tenant, path.absolute()))
        entries.append(TokenEntry(person, token_digest(token), tenant, Scope.WRITE))
    write_private(tokens_file, render(entries).rstrip("\n"))
    return sign_ins
