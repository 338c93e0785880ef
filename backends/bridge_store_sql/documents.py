"""Documents as JSON text: stored exactly as given, integers and unknown fields included."""

from __future__ import annotations

from bridge_store import jsontext
from bridge_store.types import Document


def dump(document: Document) -> str:
    # Storable whatever the strings hold: a raw NUL (which a Postgres text column
    # refuses) is escaped as JSON requires, and a lone surrogate (which has no UTF-8
    # form) makes jsontext fall back to ASCII escapes.
    return jsontext.dumps_text(document)


def load(text: str) -> Document:
    document: Document = jsontext.loads(text)
    return document
