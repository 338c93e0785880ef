"""The viewer's pages from a running server, for the CLI: what CallStore does not carry.

Who started what, runs across agents, the overview and the Markdown export are the
viewer's, not CallStore's: through a server (``--store-callback-url``), the history
commands read them as the viewer's JSON twins (``?format=json``) and its export, with
the bearer token, so the command, the page and its JSON show the same data. The server
must serve ``/ui/`` (not ``--no-ui``).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ..errors import unavailable
from ..reaching import server_url, unreachable
from ..types import Document
from ..urls import redact
from .reader import REMOTE_TIMEOUT_SECONDS, HistoryReader, RemoteCallStore, remote_error


@dataclass
class RemotePages:
    """The viewer's page data and Markdown export from a server, with a bearer token
    (read from ``token_source``, which a refusal names); ``url`` may be the viewer's."""

    url: str
    token: str = field(repr=False)
    timeout: float = REMOTE_TIMEOUT_SECONDS
    token_source: str | None = None

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"the store URL must start with http:// or https://, not {self.url!r}")
        self.url = server_url(self.url)
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        #: CallStore reads through the same server (events, to follow a run).
        remote = RemoteCallStore(self.url, self.token, self.timeout, self.token_source)
        self.reader = HistoryReader(remote)

    async def page(self, path: str, params: dict[str, str]) -> Document:
        """The data of the page at ``/ui/<path>`` with these parameters."""
        body = await asyncio.to_thread(self._get, path, {**params, "format": "json"})
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise unavailable(f"{redact(self.url)} does not answer like a bridge-store viewer")
        return data

    async def markdown(self, agent_id: str, run_id: str) -> str:
        """The run's Markdown export, as the viewer serves it."""
        body = await asyncio.to_thread(
            self._get, "export/transcript.md", {"agent": agent_id, "run": run_id}
        )
        return body.decode("utf-8")

    def _get(self, path: str, params: dict[str, str]) -> bytes:
        query = urllib.parse.urlencode(params)
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            f"{self.url.rstrip('/')}/ui/{path}?{query}",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as error:
            if error.code == 404 and "json" not in (error.headers.get("content-type") or ""):
                no_viewer = f"{redact(self.url)} serves no viewer (/ui/): start it without --no-ui"
                raise unavailable(no_viewer) from None
            raise remote_error(error, self.url, self.token_source) from None
        except (urllib.error.URLError, OSError) as error:
            raise unavailable(unreachable(self.url, error)) from None
