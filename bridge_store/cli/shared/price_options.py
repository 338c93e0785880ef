"""``--prices FILE``: the price table that turns the overview's tokens into money.

One definition for every command that shows the overview (``serve``, ``ui`` and
``overview``); the file's format is in :mod:`bridge_store.viewer.prices`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...viewer.prices import PriceTable


def add_prices_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="TOML price table (per model, per million input/output/cache tokens): the "
        "overview shows what the tokens cost",
    )


def prices_from(args: argparse.Namespace) -> PriceTable | None:
    """The table ``--prices`` names (ConfigurationError, one line, if it is wrong)."""
    if not args.prices:
        return None
    from ...viewer.prices import load_prices

    return load_prices(args.prices)
