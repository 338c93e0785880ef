"""``bridge-store prices init``: a price table of the models the store has seen.

Reads every tenant's runs of the store (the SQL backend's per-day sums, else the runs
themselves) and writes :func:`~bridge_store.pricing.template.price_template`. An
existing file is never replaced without ``--force``: the file is created only if it
does not exist (two commands writing one name: one writes it, the other says it
exists), and ``--force`` replaces it whole, through a new file renamed over it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from .shared.store_options import add_store_arguments, stack_from

if TYPE_CHECKING:
    from ..backend.shares import ModelUse
    from ..stack.stores import StoreStack

DEFAULT_FILE = "prices.toml"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prices = commands.add_parser(
        "prices",
        help="write a price table of the models the store has seen",
        description="Price tables: `prices init` writes one listing every model the "
        "store's runs name (with their first and last use), prices left to fill in.",
    )
    actions = prices.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser(
        "init",
        help="write a price table template of the store's models",
        description="Write a price table listing every model of the store's runs (every "
        "tenant), with its first and last use and its runs, prices left for you to fill "
        "in. No prices are shipped. An existing file is kept unless --force.",
    )
    init.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        default=DEFAULT_FILE,
        help="where to write it; - for standard output (default: %(default)s)",
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--currency", default="USD", help="the currency (default: %(default)s)")
    add_store_arguments(init, "store to read", key_file="read")


def run(args: argparse.Namespace) -> int:
    from ..pricing.template import price_template

    currency = args.currency.strip()
    if not currency or len(currency) > 16 or not all(c.isalnum() for c in currency):
        raise ConfigurationError("--currency must be a short name such as USD")
    stack = stack_from(args)
    models = asyncio.run(_models(stack))
    text = price_template(models, currency)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    _write(Path(args.output), text, force=args.force)
    print(
        f"bridge-store: wrote {args.output}: {len(models)} models, prices to fill in",
        file=sys.stderr,
    )
    return 0


async def _models(stack: StoreStack) -> list[ModelUse]:
    from ..backend.shares import run_shares

    async with stack.opened(migrate=False) as opened:
        own = opened.stores.beneath()
        index = run_shares(own.agents, own.runs)
        if index is not None:
            return await index.models_seen()
        return await _scanned(own)


async def _scanned(stores: object) -> list[ModelUse]:
    """Every tenant's runs read, a page at a time: the models, first and last days."""
    from ..backend.history import summarize_run
    from ..backend.shares import ModelUse
    from ..backend.statistics import DAY_MS
    from ..stack.stores import Stores

    assert isinstance(stores, Stores)
    seen: dict[str, list[int]] = {}
    for tenant in await stores.runs.tenants():
        after = None
        while True:
            page = await stores.runs.list(
                tenant, agent_ids=None, run_ids=None, after=after, limit=1000
            )
            for one in page:
                summary = summarize_run(one)
                if summary.model_id is None:
                    continue
                day = (summary.started_at or 0) // DAY_MS
                found = seen.setdefault(summary.model_id, [day, day, 0])
                found[0], found[1], found[2] = min(found[0], day), max(found[1], day), found[2] + 1
            if len(page) < 1000:
                break
            from ..backend.substores import run_position

            after = run_position(page[-1])
    return [ModelUse(model, *found) for model, found in sorted(seen.items())]


def _write(path: Path, text: str, *, force: bool) -> None:
    data = text.encode("utf-8")
    if not force:
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise ConfigurationError(
                f"{path} exists: it is kept (--force replaces it, -o names another file)"
            ) from None
        except OSError as error:
            raise ConfigurationError(f"cannot write {path}: {error.strerror}") from None
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        return
    try:
        with tempfile.NamedTemporaryFile(
            dir=path.parent, prefix=f".{path.name}.", delete=False
        ) as fresh:
            fresh.write(data)
        os.chmod(fresh.name, 0o644)
        os.replace(fresh.name, path)
    except OSError as error:
        raise ConfigurationError(f"cannot write {path}: {error.strerror}") from None
