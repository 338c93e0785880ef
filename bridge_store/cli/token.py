"""``bridge-store token add|list|revoke``: named tokens in a tokens file.

``add`` prints the new token once, on stdout, and stores only its SHA-256; a running
server picks up every change within a second (or at once on SIGHUP).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..backend.tenants import is_valid_tenant
from ..errors import ConfigurationError
from ..security.auth import TOKEN_NAME_PATTERN, Scope
from ..security.tokens_file import TOKENS_FILE_ENV, add_token, load_entries, revoke_token

#: Hex digits of a digest ``token list`` shows: enough to tell entries apart, too few
#: to be worth anything to someone who reads the screen.
SHOWN_DIGEST_DIGITS = 8


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = commands.add_parser(
        "token",
        help="manage named tokens",
        description=(
            "Manage the named tokens of a tokens file (serve --tokens-file). The file "
            "keeps each token's SHA-256, never the token."
        ),
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="COMMAND")
    add = actions.add_parser(
        "add", help="create a token and print it once", description="Create a token, print it once."
    )
    add.add_argument("name", help="the token's name, shown in logs and metrics")
    add.add_argument("--tenant", required=True, help="the tenant whose items it reads and writes")
    add.add_argument(
        "--scope",
        required=True,
        choices=[scope.value for scope in Scope],
        help="read: get and list only; write: what a bridge does; admin: also prune, export "
        "and its tenant's metrics; operator: also every tenant's metrics",
    )
    listing = actions.add_parser(
        "list",
        help="show names, tenants and scopes",
        description="Show each token's name, tenant, scope and the start of its SHA-256.",
    )
    revoke = actions.add_parser(
        "revoke",
        help="remove a token; servers refuse it within 2 s",
        description="Remove a token from the file; running servers refuse it within 2 s.",
    )
    revoke.add_argument("name", help="the token's name, as 'token list' shows it")
    for parser in (add, listing, revoke):
        parser.add_argument(
            "--tokens-file",
            metavar="PATH",
            help=f"the tokens file (env {TOKENS_FILE_ENV}; one of the two is required)",
        )


def run(args: argparse.Namespace) -> int:
    path = _tokens_file(args)
    if args.action == "add":
        if not TOKEN_NAME_PATTERN.fullmatch(args.name):
            raise ConfigurationError("a token name is 1-64 characters of letters, digits and ._@-")
        if not is_valid_tenant(args.tenant):
            raise ConfigurationError("a tenant is 1-63 characters of a-z, 0-9, '-' and '_'")
        print(add_token(path, args.name, tenant=args.tenant, scope=Scope(args.scope)))
    elif args.action == "revoke":
        revoke_token(path, args.name)
    else:
        entries = load_entries(path)  # a file that cannot be read prints no header
        print(f"{'NAME':<24} {'TENANT':<24} {'SCOPE':<8} SHA256")
        for entry in entries:
            digest = entry.sha256.hex()[:SHOWN_DIGEST_DIGITS]
            print(f"{entry.name:<24} {entry.tenant:<24} {entry.scope.value:<8} {digest}...")
    return 0


def _tokens_file(args: argparse.Namespace) -> Path:
    value = args.tokens_file or os.environ.get(TOKENS_FILE_ENV)
    if not value:
        raise ConfigurationError(f"name the tokens file: --tokens-file PATH or {TOKENS_FILE_ENV}")
    return Path(value)
