"""``--prices FILE``: the price table that turns tokens into money.

One definition for every command that shows costs (``serve``, ``ui`` and
``overview``), read from the flag, else ``BRIDGE_STORE_PRICES`` (and ``prices`` in
serve's ``--config``); the file's format is in :mod:`bridge_store.pricing.loader`.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...pricing.book import PriceBook

PRICES_ENV = "BRIDGE_STORE_PRICES"


def add_prices_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="TOML price table (per model, prices per million tokens from a date on, and "
        "monthly budgets per tenant): pages show what runs cost; serve reads it again on "
        f"SIGHUP (default: ${PRICES_ENV})",
    )


def prices_path(args: argparse.Namespace) -> str | None:
    return args.prices or os.environ.get(PRICES_ENV) or None


def prices_from(args: argparse.Namespace) -> PriceBook:
    """The book of the table ``--prices`` names (ConfigurationError, one line, if it is
    wrong); an empty book without one."""
    from ...pricing.book import PriceBook

    return PriceBook.read(prices_path(args))
