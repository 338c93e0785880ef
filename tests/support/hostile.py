"""Cursors a client could forge, for tests/test_contract.py and tests/test_fuzz.py."""

from __future__ import annotations

import base64
import json

from bridge_store.contract import MAX_CURSOR_LENGTH, MAX_KEY_BYTES


def _b64(raw: str | bytes) -> str:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


#: For each listing kind: nesting that would exhaust a recursive parser, integers
#: outside 64 bits or outside a double (in the JSON form cursors had before, too), ids
#: the contract refuses, bytes that are not UTF-8, and sheer length.
HOSTILE_CURSORS: dict[str, list[str]] = {
    kind: [
        _b64("[" * 3000),
        *(
            _b64(json.dumps([kind, big, *["a"] * arity]))
            for big in (2**63, -(2**63) - 1, 10**30, 1e308)
            for arity in (1, 2)
        ),
        _b64(f"{kind}\x00{2**63}\x00a\x00b"),
        _b64(f"{kind}\x00{-(2**63) - 1}\x00a\x00b"),
        _b64(f"{kind}\x00{10**30}\x00a\x00b"),
        _b64(f"{kind}\x001e308\x00a\x00b"),
        _b64(f"{kind}\x00{2**53 + 1}\x00a\x00b"),
        _b64(f"{kind}\x007\x00{'a' * (MAX_KEY_BYTES + 1)}\x00b"),
        _b64(f"{kind}\x00\x00\x00"),
        _b64(f"{kind}\x00\ud83d\x00a\x00b"),
        _b64(b"\xff\xfe\x00\x01"),
        "A" * (MAX_CURSOR_LENGTH + 1),
        "é",
        "=",
    ]
    for kind in ("agents", "runs", "checkpoints")
}
