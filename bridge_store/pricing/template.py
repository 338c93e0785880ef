"""The price table ``bridge-store prices init`` writes: every model the store has seen.

No prices are shipped (none anybody here can check): each model the store's runs name,
in any tenant, gets an entry whose prices are left for the user to fill in, with when
it was first and last used and how many runs it has, so nobody types a model id by
hand. The file reads as it is written (an entry without prices leaves its model
unpriced: its runs show their tokens and "unpriced"), so a team can serve it at once
and fill in prices one model at a time; ``SIGHUP`` makes a server read it again.
Model ids are written as TOML keys that hold any id on one line (controls and every
non-ASCII character as escapes), in the comments too.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backend.shares import ModelUse
from .loader import toml_key
from .table import day_of

HEADER = """\
# bridge-store price table, written by `bridge-store prices init`.
#
# Each model the store has runs of has an entry below. Fill in its prices, per
# million tokens, in your currency: input and output at least; cache_read and
# cache_write are 0 unless given. An entry with no prices leaves its model
# unpriced: its runs show their tokens and "unpriced", never a cost of zero.
# No prices come with bridge-store: take them from your provider's price list.
#
# When a price changes, keep the old entry, give it `until = YYYY-MM-DD` (the first
# day it no longer holds) and add one with `from = YYYY-MM-DD` and the new prices:
# each run is priced at the entry in force on the UTC day it started.
#
# Serve it: bridge-store serve --prices prices.toml (or BRIDGE_STORE_PRICES, or
# prices = "..." in --config); after an edit, send the server SIGHUP.
"""

BUDGETS = """\
# Monthly budgets per tenant (a UTC calendar month, in the currency above): the
# overview shows spend against them, /metrics exposes them for the alert rules in
# deploy/prometheus.
# [budgets]
# default = 500
"""


def price_template(models: Sequence[ModelUse], currency: str = "USD") -> str:
    parts = [HEADER, f'\ncurrency = "{currency}"\n']
    if not models:
        parts.append('\n# The store has no runs of any model yet: add [[models."ID"]] entries.\n')
    for use in models:
        key = toml_key(use.model)
        parts.append(
            f"\n# {key}: {use.runs:,} runs, first used {day_of(use.first_day)}, "
            f"last used {day_of(use.last_day)}\n"
            f"[[models.{key}]]\n"
            "# input = 0.00\n# output = 0.00\n# cache_read = 0.00\n# cache_write = 0.00\n"
        )
    parts.append("\n" + BUDGETS)
    return "".join(parts)
