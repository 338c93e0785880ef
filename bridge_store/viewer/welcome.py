"""What an empty agents list says: how a bridge connects here, and where history is.

A viewer with nothing to show is the first page most people see. Instead of "no agents
match", it shows the exact command that connects a bridge to this server (its URL and
where its token is) and, when the store holds history in other tenants, which ones and
how to read them.

Tenant names are shown only to whoever holds the store itself: the one-token shorthand
(whose holder could open the database anyway), ``bridge-store ui`` and the CLI reading
a store URL. A named token sees its own tenant only, never that others exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ..backend.tenants import is_valid_tenant
from ..security.auth import TokenRegistry
from ..security.tokens import TOKEN_ENV
from ..types import Document

#: Lists the tenants holding agents (``AgentStore.tenants``); None when not to be told.
TenantLister = Callable[[], Awaitable[Sequence[str]]]

#: What the bridge's agents and runs need, and how to try it without (``--offline``).
RUN_NOTE = (
    "Agents and runs need a Cursor API key (CURSOR_API_KEY) and the Cursor API. Without "
    "them, add --offline: the bridge then talks to an offline stand-in for the Cursor API, "
    "its agents are kept here all the same, and every run ends at once with an error "
    "saying no model runs offline"
)
#: Where import-local puts history unless told otherwise (its --tenant).
IMPORT_NOTE = (
    "history brought in by bridge-store import-local lands in tenant default unless it is "
    "given --tenant NAME"
)


def sole_holder(tokens: TokenRegistry) -> bool:
    """One token and no tokens file (serve's shorthand, the ui command's): its holder
    holds the store, so may learn which tenants it has."""
    return tokens.path is None and len(tokens.entries) == 1


@dataclass(frozen=True, slots=True)
class BridgeHint:
    """Where a bridge finds this server's token: the one token's file, the variable
    holding it, or a tokens file of named tokens. None of them is the token.
    ``program`` is how to run ``bridge-store`` where the server was started (its path
    when the name is not on the PATH)."""

    token_file: str | None = None
    token_env: bool = False
    named_tokens: bool = False
    program: str = "bridge-store"


@dataclass(frozen=True, slots=True)
class Welcome:
    """The empty page's help for one signed-in principal.

    ``hint`` is None for a viewer with no CallStore endpoint (``bridge-store ui``, which
    picks its tenant with ``--tenant``); ``tenants`` None when the principal is not to
    learn which other tenants exist.
    """

    tenant: str
    hint: BridgeHint | None
    tenants: TenantLister | None = None

    async def describe(self, server_url: str) -> Document:
        """The data the empty page shows, and its JSON twin carries."""
        data: Document = {"tenant": self.tenant, "importNote": IMPORT_NOTE}
        data.update(self._connect(server_url))
        if self.tenants is not None:
            found = set(await self.tenants()) - {self.tenant}
            # Valid names only, whatever a store written around the server holds.
            others = sorted(name for name in found if is_valid_tenant(name))
            if others:
                data["otherTenants"] = others
                data["chooseTenant"] = self._choose(others[0])
        return data

    def _connect(self, server_url: str) -> Document:
        hint = self.hint
        if hint is None:
            return {
                "command": "bridge-store serve --store URL",
                "connectNote": (
                    "This viewer only reads (bridge-store ui). Bridges write through a "
                    "server on the same store: serve it, then run bridge-store bridge "
                    "--store-callback-url with the server's URL and token"
                ),
            }
        command = f"{hint.program} bridge --store-callback-url {server_url}"
        if hint.token_file is not None:
            command += f" --store-auth-token-file {hint.token_file}"
            return {"command": command, **self._runs(command)}
        if hint.named_tokens:
            command += " --store-auth-token-file FILE"
            return {
                "command": command,
                **self._runs(command),
                "connectNote": (
                    f"FILE holds a write token of tenant {self.tenant}; whoever keeps the "
                    f"tokens file makes one with: bridge-store token add NAME --tenant "
                    f"{self.tenant} --scope write --tokens-file PATH"
                ),
            }
        return {
            "command": command,
            "connectNote": f"with the server's token in ${TOKEN_ENV}, as the server has it",
            **self._runs(command),
        }

    @staticmethod
    def _runs(command: str) -> Document:
        """What a run needs, and the command without it."""
        return {"runNote": RUN_NOTE, "offlineCommand": f"{command} --offline"}

    def _choose(self, example: str) -> str:
        if self.hint is None:
            return f"Start this viewer with --tenant {example} to read that tenant."
        return (
            f"Sign in with a token of that tenant (bridge-store token add NAME --tenant "
            f"{example} --scope read --tokens-file PATH, served with --tokens-file), or read "
            f"it with bridge-store ui --store URL --tenant {example}."
        )
