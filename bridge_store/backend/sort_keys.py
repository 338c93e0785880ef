"""Where a stored row sorts, as a list cursor can say it, whatever the row holds.

Cursors carry integer sort keys (``updatedAt``, ``turnNumber``) within ±2**53. Since
imports are checked every stored key is one, but a store may hold rows written before:
SQLite kept ``"yesterday"``, ``1.5`` or ``10**17`` as given, and a cursor that could not
say where such a row sorts broke the tenant's paging for good. So the key of the last
row of a page is moved away from the rows still to come, never back over the row (a
next page never returns it again, so paging always ends):

- a number is rounded that way (down when listing newest first, up when oldest
  first), and kept within ±2**53 where that still moves away; when it cannot, no
  cursor goes past the row, and the listing ends there;
- text, which SQLite sorts above every number, is the top of the range when listing
  newest first (the numbers come next), and ends a listing oldest first.

Rows skipped so (beyond the range, or text after text) are still read by id.
"""

from __future__ import annotations

import math
from typing import Any


def sort_integer(value: Any, *, ascending: bool, bound: int) -> int | None:
    """The cursor integer (within ±``bound``) after a row whose sort key is ``value``;
    None if no cursor goes past the row."""
    if isinstance(value, str):
        return None if ascending else bound
    if not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if ascending:
        number = math.ceil(value)
        return None if number > bound else max(number, -bound)
    number = math.floor(value)
    return None if number < -bound else min(number, bound)
