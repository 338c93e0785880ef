"""Plain JSON CallStore calls over HTTP, for checks that read every answer.

The load benches seed and audit through it, and so do the failover tests and bench
(``testkit.appenders``); it is httpx and the wire path, nothing of the product's client.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from bridge_store.rpc.connect import CALL_STORE_PATH


class CallStoreClient:
    """Plain JSON CallStore calls over one keep-alive connection."""

    def __init__(self, base_url: str, token: str) -> None:
        self._url = base_url.rstrip("/") + CALL_STORE_PATH
        self._http = httpx.Client(
            timeout=60.0,
            headers={
                "Authorization": f"Bearer {token}",
                "Connect-Protocol-Version": "1",
                "Content-Type": "application/json",
            },
        )

    def send(self, body: str) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body) of one request body."""
        response = self._http.post(self._url, content=body.encode())
        return response.status_code, response.json()

    def call(self, substore: str, method: str, data: Any) -> Any:
        """The output of a call that must succeed."""
        body = json.dumps({"substore": substore, "method": method, "input": data})
        status, answer = self.send(body)
        if status != 200:
            raise RuntimeError(f"{substore}.{method} answered {status}: {answer}")
        return answer.get("output")

    def close(self) -> None:
        self._http.close()
