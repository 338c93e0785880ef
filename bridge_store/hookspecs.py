"""Where plugins written before the backend API had its folder import it from: the
same names as :mod:`bridge_store.backend.hookspecs`, which a plugin should import now."""

from .backend.hookspecs import (
    PROJECT,
    bridge_store_open_backend,
    bridge_store_url_schemes,
    hookimpl,
    hookspec,
)

__all__ = [
    "PROJECT",
    "bridge_store_open_backend",
    "bridge_store_url_schemes",
    "hookimpl",
    "hookspec",
]
