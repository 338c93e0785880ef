"""Tenants, as every backend keeps them apart: what a tenant's name may be, and the
tenant of everything stored before tenants existed.

Every substore method takes the caller's tenant first, already checked against
:data:`TENANT_PATTERN` (:mod:`bridge_store.security.auth` checks each token's).
"""

from __future__ import annotations

import re

#: The tenant of everything stored before tenants existed, and of the one-token shorthand.
DEFAULT_TENANT = "default"
#: Tenant names end up in SQL values, Redis hash tags and S3 key segments: lowercase
#: letters, digits, ``-`` and ``_`` are safe in all three without quoting or escaping.
TENANT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def is_valid_tenant(name: str) -> bool:
    return TENANT_PATTERN.fullmatch(name) is not None


def check_tenant(name: str) -> str:
    """``name`` if it is a valid tenant name; ValueError naming the rule otherwise."""
    if not is_valid_tenant(name):
        raise ValueError(
            f"tenant {name[:80]!r} must be 1-63 characters of a-z, 0-9, '-' and '_', "
            "starting with a letter or digit"
        )
    return name
