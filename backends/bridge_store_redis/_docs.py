"""Documents as stored bytes: compact JSON, UTF-8."""

from __future__ import annotations

import json

from bridge_store.types import Document

from .keys import from_utf8, utf8


def encode(doc: Document) -> bytes:
    return utf8(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))


def decode(raw: bytes) -> Document:
    doc: Document = json.loads(from_utf8(raw))
    return doc
