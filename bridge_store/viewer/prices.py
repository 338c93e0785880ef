"""A price table, so the overview's tokens can be read as money (``--prices FILE``).

TOML, one table per model id, prices per million tokens::

    currency = "USD"            # optional; USD unless given

    [models."composer-2"]
    input = 1.25
    output = 10.0
    cache_read = 0.125          # optional, 0 unless given
    cache_write = 1.25          # optional, 0 unless given

Every mistake (a file that cannot be read, TOML that does not parse, an unknown key, a
price that is not a number from 0 to :data:`MAX_PRICE`) is one line naming the file and
the key, raised as :class:`~bridge_store.errors.ConfigurationError`.

With prices so bounded, no cost of any token counts a store holds overflows a float;
:meth:`PriceTable.cost` still answers None rather than a non-finite number, so every
JSON that shows a cost (the viewer's, ``overview --json``) says ``null`` alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ..history import TOKEN_KINDS
from ..toml_files import load_toml

#: Price keys -> the token kind each prices (``history.TOKEN_KINDS``).
PRICED = dict(zip(("input", "output", "cache_read", "cache_write"), TOKEN_KINDS, strict=True))
REQUIRED = ("input", "output")
PER_TOKENS = 1_000_000
#: The highest price per million tokens taken: a thousand units of any currency per
#: token, above every model's price in every currency in use, and far enough below a
#: float's range that no product of it with a token count overflows.
MAX_PRICE = 1e9


@dataclass(frozen=True, slots=True)
class PriceTable:
    currency: str
    #: Model id -> token kind -> price per million tokens.
    models: dict[str, dict[str, float]]

    def cost(self, model: str | None, tokens: dict[str, int]) -> float | None:
        """What ``tokens`` of ``model`` cost; None for a model the table does not price."""
        prices = self.models.get(model) if model is not None else None
        if prices is None:
            return None
        cost = sum(tokens.get(kind, 0) * price for kind, price in prices.items()) / PER_TOKENS
        # Not reachable with a table load_prices read; a table built otherwise says
        # "no cost" rather than Infinity, which JSON cannot carry.
        return cost if math.isfinite(cost) else None


def load_prices(path: str | Path) -> PriceTable:
    """The price table in the TOML file at ``path``; ConfigurationError (one line) if not."""
    where = str(path)
    document = load_toml(path, "--prices", "a price table")
    return parse_prices(document, where)


def parse_prices(document: dict[str, Any], where: str) -> PriceTable:
    def problem(text: str) -> ConfigurationError:
        return ConfigurationError(f"--prices {where}: {text}")

    unknown = sorted(set(document) - {"currency", "models"})
    if unknown:
        raise problem(f"unknown key {unknown[0]!r} (a price table has currency and [models.ID])")
    currency = document.get("currency", "USD")
    if not isinstance(currency, str) or not currency.strip() or len(currency) > 16:
        raise problem("currency must be a short name such as USD")
    models = document.get("models")
    if not isinstance(models, dict) or not models:
        raise problem('no [models."MODEL-ID"] table: name the price of at least one model')
    table: dict[str, dict[str, float]] = {}
    for model, prices in models.items():
        if not isinstance(prices, dict):
            raise problem(f"models.{model} must be a table of prices")
        extra = sorted(set(prices) - set(PRICED))
        if extra:
            raise problem(f"models.{model}.{extra[0]} is not a price ({', '.join(PRICED)})")
        missing = [key for key in REQUIRED if key not in prices]
        if missing:
            raise problem(f"models.{model} has no {missing[0]} price")
        table[model] = {}
        for key, value in prices.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0 <= value <= MAX_PRICE
            ):
                raise problem(
                    f"models.{model}.{key} must be a number from 0 to {MAX_PRICE:,.0f} "
                    f"(per million tokens), not {value!r}"
                )
            table[model][PRICED[key]] = float(value)
    return PriceTable(currency=currency.strip(), models=table)
