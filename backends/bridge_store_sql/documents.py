"""Documents as JSON text: stored exactly as given, integers and unknown fields included."""

from __future__ import annotations

import json

from bridge_store.types import Document


def dump(document: Document) -> str:
    # ASCII escapes keep every string storable (a lone surrogate cannot be UTF-8
    # encoded, a raw NUL cannot live in a Postgres text column); json escapes both.
    return json.dumps(document, separators=(",", ":"))


def load(text: str) -> Document:
    document: Document = json.loads(text)
    return document
