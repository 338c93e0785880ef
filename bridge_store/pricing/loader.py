"""Reading the price table's TOML file (``--prices``, ``prices`` in ``--config``,
``BRIDGE_STORE_PRICES``): every mistake is one line naming the file and the key.

::

    currency = "USD"                      # optional; USD unless given

    [[models."composer-2"]]               # one entry per period a price held
    from = 2026-01-01                     # its first UTC day (none: from the start)
    until = 2026-06-01                    # the first day it no longer holds (optional)
    input = 1.25                          # per million tokens
    output = 10.0
    cache_read = 0.125                    # optional, 0 unless given
    cache_write = 1.25                    # optional, 0 unless given

    [[models."composer-2"]]
    from = 2026-06-01
    input = 1.00
    output = 8.00

    [budgets]                             # per tenant, per calendar month (UTC)
    default = 500
    "team-a" = 2000

The format before dates, one ``[models."ID"]`` table per model, still reads: it is one
entry in force on every day. An entry that gives no price at all (what ``prices init``
writes for each model it lists) leaves its model unpriced until it is filled in.

Refused, each in one line: an unknown key or field, a price or budget that is not a
number from 0 to its bound (negative, NaN, infinite, a string, true), a price with
more than nine decimals, a date that is not a date (prices change at the start of a
UTC day, so a time of day is refused too), an entry whose ``until`` is not after its
``from``, two entries of a model that hold on a common day, a budget for a name that
cannot be a tenant.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..backend.statistics import DAY_MS, label
from ..backend.tenants import TENANT_PATTERN
from ..errors import ConfigurationError
from ..toml_files import read_toml
from .money import COST_SCALE, PRICE_SCALE, scaled
from .table import (
    PRICE_KEYS,
    PriceEntry,
    PriceTable,
    TableVersion,
    day_of,
    overlap,
    sorted_entries,
)

#: The highest price per million tokens taken: a thousand units of any currency per
#: token, above every model's price in every currency in use.
MAX_PRICE = 10**9
#: The highest monthly budget taken.
MAX_BUDGET = 10**12
DATE_KEYS = ("from", "until")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: A tenant's name, as every backend keeps tenants apart.
TENANT_NAME = TENANT_PATTERN


def load_prices(path: str | Path) -> PriceTable:
    """The price table in the TOML file at ``path``; ConfigurationError (one line) if not."""
    read = read_toml(path, "--prices", "a price table", parse_float=Decimal)
    version = TableVersion(
        digest=hashlib.sha256(read.raw).hexdigest()[:12],
        modified_ms=read.status.st_mtime_ns // 1_000_000,
    )
    return parse_prices(read.document, str(path), version)


def toml_key(name: str) -> str:
    """``name`` as a TOML key on one line: bare when it can be, else a quoted string
    whose controls (and every non-ASCII character) are escapes."""
    if _BARE_KEY.fullmatch(name):
        return name
    return json.dumps(name, ensure_ascii=True)


class _Problem:
    def __init__(self, where: str) -> None:
        self.where = where

    def __call__(self, text: str) -> ConfigurationError:
        return ConfigurationError(f"--prices {self.where}: {text}")


def parse_prices(
    document: dict[str, Any], where: str, version: TableVersion | None = None
) -> PriceTable:
    problem = _Problem(where)
    unknown = sorted(set(document) - {"currency", "models", "budgets"})
    if unknown:
        raise problem(
            f"unknown key {unknown[0]!r} (a price table has currency, [models.ID] and [budgets])"
        )
    currency = document.get("currency", "USD")
    if (
        not isinstance(currency, str)
        or not currency.strip()
        or len(currency.strip()) > 16
        or not all(c.isprintable() and not c.isspace() for c in currency.strip())
    ):
        raise problem("currency must be a short name such as USD")
    models = document.get("models", {})
    budgets = document.get("budgets", {})
    if not isinstance(models, dict) or not isinstance(budgets, dict) or not (models or budgets):
        raise problem(
            'no [models."MODEL-ID"] table and no [budgets]: name the price of at least one '
            "model (bridge-store prices init writes a table of the models the store has seen)"
        )
    table = {model: _entries(problem, model, entries) for model, entries in sorted(models.items())}
    return PriceTable(
        currency=currency.strip(),
        models=table,
        budgets={tenant: _budget(problem, tenant, value) for tenant, value in budgets.items()},
        version=version,
    )


def _entries(problem: _Problem, model: str, given: Any) -> tuple[PriceEntry, ...]:
    name = f"models.{toml_key(model)}"
    if label(model) != model:
        raise problem(f"{name} is not a model id a run can have")
    if isinstance(given, dict):
        parts = [(name, given)]
    elif isinstance(given, list) and given and all(isinstance(one, dict) for one in given):
        parts = [(f"{name}[{n}]", one) for n, one in enumerate(given, start=1)]
    else:
        raise problem(f"{name} must be a table of prices")
    entries = sorted_entries(_entry(problem, place, one) for place, one in parts)
    clash = overlap(entries)
    if clash is not None:
        first, second = (_span(entry) for entry in clash)
        raise problem(f"{name}: the entries {first} and {second} overlap (one price a day)")
    return entries


def _entry(problem: _Problem, name: str, given: dict[str, Any]) -> PriceEntry:
    extra = sorted(set(given) - {*PRICE_KEYS, *DATE_KEYS})
    if extra:
        raise problem(
            f"{name}.{toml_key(extra[0])} is not a price or a date "
            f"({', '.join(PRICE_KEYS)}; {', '.join(DATE_KEYS)})"
        )
    first = _day(problem, f"{name}.from", given.get("from"))
    end = _day(problem, f"{name}.until", given.get("until"))
    if first is not None and end is not None and end <= first:
        raise problem(f"{name}: until must be a day after from")
    if not any(key in given for key in PRICE_KEYS):
        return PriceEntry(first, end, None)  # listed, to be filled in: unpriced
    missing = [key for key in ("input", "output") if key not in given]
    if missing:
        raise problem(f"{name} has no {missing[0]} price")
    prices = tuple(_price(problem, f"{name}.{key}", given.get(key, 0)) for key in PRICE_KEYS)
    return PriceEntry(first, end, (prices[0], prices[1], prices[2], prices[3]))


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    number = Decimal(value)
    return number if number.is_finite() else None


def _shown(value: Any) -> str:
    return str(value) if isinstance(value, Decimal) else repr(value)[:60]


def _price(problem: _Problem, name: str, value: Any) -> int:
    number = _number(value)
    if number is None or not 0 <= number <= MAX_PRICE:
        raise problem(
            f"{name} must be a number from 0 to {MAX_PRICE:,} (per million tokens), "
            f"not {_shown(value)}"
        )
    try:
        return scaled(number, PRICE_SCALE)
    except ValueError:
        raise problem(f"{name} has more than 9 decimals: {_shown(value)}") from None


def _budget(problem: _Problem, tenant: Any, value: Any) -> int:
    name = f"budgets.{toml_key(str(tenant))}"
    if TENANT_NAME.fullmatch(str(tenant)) is None:
        raise problem(f"{name}: not a tenant name (a-z, 0-9, _ and -, up to 63)")
    number = _number(value)
    if number is None or not 0 <= number <= MAX_BUDGET:
        raise problem(
            f"{name} must be a number from 0 to {MAX_BUDGET:,} (per month), not {_shown(value)}"
        )
    try:
        return scaled(number, COST_SCALE)
    except ValueError:
        raise problem(f"{name} has more than 15 decimals: {_shown(value)}") from None


def _day(problem: _Problem, name: str, value: Any) -> int | None:
    """A UTC day number from a TOML date or a "YYYY-MM-DD" string."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) == 10:
        with contextlib.suppress(ValueError):
            value = date.fromisoformat(value)
    if isinstance(value, datetime) or not isinstance(value, date):
        raise problem(
            f"{name} must be a date (YYYY-MM-DD; prices change at the start of a UTC day), "
            f"not {_shown(value)}"
        )
    midnight = datetime(value.year, value.month, value.day, tzinfo=UTC)
    return int(midnight.timestamp() * 1000) // DAY_MS


def _span(entry: PriceEntry) -> str:
    start = day_of(entry.first_day) if entry.first_day is not None else "the start"
    end = f" until {day_of(entry.end_day)}" if entry.end_day is not None else ""
    return f"from {start}{end}"
