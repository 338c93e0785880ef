"""The price table: dated entries, budgets, exact money, one line for every mistake.

A run is priced at its model's entry in force on the UTC day it started; entries that
leave their prices to be filled in leave the model unpriced (never a cost of zero);
costs are exact integers written as decimal text, so no JSON ever carries a float
that lost cents or ``Infinity``. The file of the format before dates still reads. The
book reads the file again when asked (SIGHUP) and keeps the last good table when the
file has a mistake.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from datetime import date
from pathlib import Path

import pytest

from bridge_store.cli import main
from bridge_store.errors import ConfigurationError
from bridge_store.pricing.book import PriceBook
from bridge_store.pricing.loader import load_prices
from bridge_store.pricing.money import COST_SCALE, cost_text, percent_change, shown_money
from bridge_store.toml_files import MAX_TOML_BYTES

DATED = """
currency = "EUR"
[[models."composer-2"]]
from = 2026-01-01
until = 2026-06-01
input = 1.25
output = 10.0
cache_read = 0.125
cache_write = 1.25
[[models."composer-2"]]
from = "2026-06-01"
input = 1
output = 8
[models.gpt-5]
input = 2
output = 8
[[models."to-fill"]]
from = 2026-01-01
[budgets]
default = 500
"team-a" = 2000.5
"""


def day(text: str) -> int:
    return (date.fromisoformat(text) - date(1970, 1, 1)).days


def table_file(tmp_path: Path, text: str = DATED) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return path


def test_a_run_is_priced_at_the_entry_in_force_on_its_day(tmp_path: Path) -> None:
    table = load_prices(table_file(tmp_path))
    tokens = {"inputTokens": 1_000_000, "outputTokens": 200_000, "cacheWriteTokens": 10}
    # 1M input at 1.25 + 0.2M output at 10 + 10 cache writes at 1.25 per million.
    # 3.2500125 exactly, written with six decimals, half to even.
    assert cost_text(table.cost("composer-2", day("2026-05-31"), tokens)) == "3.250012"
    assert table.cost("composer-2", day("2026-05-31"), tokens) == 3_250_012_500_000_000
    # From June on, the second entry: 1M at 1 + 0.2M at 8 (no cache prices: 0).
    assert cost_text(table.cost("composer-2", day("2026-06-01"), tokens)) == "2.600000"
    # Before the first entry, and a model listed without prices: unpriced, not zero.
    assert table.cost("composer-2", day("2025-12-31"), tokens) is None
    assert table.cost("to-fill", day("2026-03-01"), tokens) is None
    assert table.cost("unknown-model", day("2026-03-01"), tokens) is None
    assert table.cost(None, day("2026-03-01"), tokens) is None
    # An entry without dates holds on every day, the 1970s and after 9999 included.
    assert table.cost("gpt-5", -5, {"inputTokens": 1_000_000}) == 2 * COST_SCALE
    # The days a range must be cut at for one price per model a part.
    assert table.change_days(day("2025-01-01"), day("2027-01-01")) == [
        day("2026-01-01"),
        day("2026-06-01"),
    ]
    assert table.run_cost("composer-2", day("2026-07-01") * 86_400_000, None) is None
    assert table.currency == "EUR"
    assert cost_text(table.budget("team-a")) == "2000.500000"
    assert table.budget("team-b") is None


def test_the_format_before_dates_still_reads(tmp_path: Path) -> None:
    path = table_file(tmp_path, '[models."composer-2"]\ninput = 1.0\noutput = 10\n')
    table = load_prices(path)
    assert table.currency == "USD"
    assert cost_text(table.cost("composer-2", 0, {"outputTokens": 100_000})) == "1.000000"


def test_costs_are_exact_whatever_the_counts(tmp_path: Path) -> None:
    table = load_prices(table_file(tmp_path, "[models.m]\ninput = 1000000000\noutput = 0.1\n"))
    huge = 2**53
    cost = table.cost("m", 0, {"inputTokens": huge, "outputTokens": 3})
    assert cost is not None
    text = cost_text(cost)
    assert text == f"{huge * 1000}.000000"  # exactly; 3 output tokens at 0.1/M: 3e-7
    json.loads(json.dumps({"cost": text}, allow_nan=False))
    # Prices as floats would have lost it: 0.1 + 0.2 per million is 0.3, not 0.30000000000000004.
    sum_table = load_prices(table_file(tmp_path, "[models.m]\ninput = 0.1\noutput = 0.2\n"))
    both = sum_table.cost("m", 0, {"inputTokens": 10**6, "outputTokens": 10**6})
    assert cost_text(both) == "0.300000"
    # Negative counts (CallStore takes any integer) give a negative cost, not an error.
    assert cost_text(table.cost("m", 0, {"inputTokens": -(10**6)})) == "-1000000000.000000"


def test_money_as_a_person_reads_it() -> None:
    assert shown_money(None, "USD") == "-"
    assert shown_money(0, "USD") == "0.00 USD"
    assert shown_money(12_345, "USD") == "< 0.0001 USD"  # never "0.00" for a cost
    assert shown_money(42 * 10**11, "USD") == "0.0042 USD"
    assert shown_money(1_234_567_890 * 10**13, "EUR") == "12,345,678.90 EUR"
    assert percent_change(150, 100) == "+50%"
    assert percent_change(1, 3) == "-67%"
    assert percent_change(5, 0) is None
    assert percent_change(100, 100) == "0%"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"\xff\xfe", "not UTF-8 text"),
        (b"[models\n", "not TOML"),
        (b"price = 1\n[models.a]\ninput = 1\noutput = 1\n", "unknown key 'price'"),
        (b"currency = 5\n[models.a]\ninput = 1\noutput = 1\n", "currency must be"),
        (b'currency = "U\\u202eSD"\n[models.a]\ninput = 1\noutput = 1\n', "currency must be"),
        (b"", "no [models."),
        (b"models = 3\n", "no [models."),
        (b"[models]\na = 1\n", "models.a must be a table"),
        (b"[models.a]\ninput = 1\n", "models.a has no output price"),
        (b"[models.a]\ninput = 1\noutput = 1\nreasoning = 2\n", "models.a.reasoning is not"),
        (b"[models.a]\ninput = -1\noutput = 1\n", "models.a.input must be a number from 0"),
        (b"[models.a]\ninput = nan\noutput = 1\n", "models.a.input must be a number from 0"),
        (b"[models.a]\ninput = inf\noutput = 1\n", "not Infinity"),
        (b"[models.a]\ninput = true\noutput = 1\n", "models.a.input must be a number from 0"),
        (b'[models.a]\ninput = "1"\noutput = 1\n', "models.a.input must be a number from 0"),
        (b"[models.a]\ninput = 1e308\noutput = 1\n", "from 0 to 1,000,000,000"),
        (b"[models.a]\ninput = 1e-12\noutput = 1\n", "more than 9 decimals"),
        (b'[models."a\\u0000b"]\ninput = 1\noutput = 1\n', 'models."a\\u0000b" is not a model'),
        (
            b"[[models.a]]\nfrom = 2026-01-01\ninput = 1\noutput = 1\n"
            b"[[models.a]]\nfrom = 2026-03-01\ninput = 2\noutput = 2\n"
            b"[[models.a]]\nfrom = 2026-02-01\nuntil = 2026-02-10\ninput = 2\noutput = 2\n",
            "the entries from 2026-01-01 and from 2026-02-01 until 2026-02-10 overlap",
        ),
        (
            b"[[models.a]]\ninput = 1\noutput = 1\n[[models.a]]\ninput = 2\noutput = 2\n",
            "the entries from the start and from the start overlap",
        ),
        (b"[models.a]\nfrom = 2026-01-01T10:00:00Z\ninput = 1\noutput = 1\n", "must be a date"),
        (b"[models.a]\nfrom = 10:00:00\ninput = 1\noutput = 1\n", "must be a date"),
        (b'[models.a]\nfrom = "May 1"\ninput = 1\noutput = 1\n', "must be a date"),
        (
            b"[models.a]\nfrom = 2026-02-01\nuntil = 2026-02-01\ninput = 1\noutput = 1\n",
            "until must be a day after from",
        ),
        (b"[models.a]\ninput = 1\noutput = 1\n[budgets]\nTeam = 5\n", "budgets.Team: not a tenant"),
        (b"[budgets]\nteam = -5\n", "budgets.team must be a number from 0"),
        (b"[budgets]\nteam = 1e20\n", "budgets.team must be a number from 0"),
        (b"a = " + b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_a_wrong_price_table_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, text: bytes, problem: str
) -> None:
    path = tmp_path / "prices.toml"
    path.write_bytes(text)
    with pytest.raises(ConfigurationError) as raised:
        load_prices(path)
    message = str(raised.value)
    assert message.startswith(f"--prices {path}: ")
    assert problem in message
    assert "\n" not in message


def test_a_missing_price_table_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"^--prices .*: cannot read it: No such file"):
        load_prices(tmp_path / "nope.toml")


def test_a_price_table_past_the_size_bound_or_not_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--prices /dev/zero`` read until memory ran out; a FIFO waited for a writer."""
    large = tmp_path / "large.toml"
    large.write_bytes(b"[models.a]\ninput = 1\noutput = 1\n" + b"#" * MAX_TOML_BYTES)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    problems = {
        large: "larger than 1 MiB, too large to be a price table",
        Path("/dev/zero"): "not a regular file (it is a FIFO, socket or device)",
        fifo: "not a regular file (it is a FIFO, socket or device)",
        tmp_path: "not a regular file (it is a directory)",
    }
    for path, problem in problems.items():
        outcome: list[object] = []

        def load(path: Path = path, outcome: list[object] = outcome) -> None:
            try:
                outcome.append(load_prices(path))
            except BaseException as error:
                outcome.append(error)

        # In a thread with a bound, so a loader that blocks (the FIFO) fails the test.
        reader = threading.Thread(target=load, daemon=True)
        reader.start()
        reader.join(10)
        assert outcome, f"loading {path} did not finish within 10 s"
        assert isinstance(outcome[0], ConfigurationError), f"{path}: {outcome[0]!r}"
        assert str(outcome[0]) == f"--prices {path}: {problem}"
    exact = tmp_path / "exact.toml"
    text = b"[models.a]\ninput = 1\noutput = 1\n"
    exact.write_bytes(text + b"#" * (MAX_TOML_BYTES - len(text)))
    assert load_prices(exact).prices("a", 0) == (10**9, 10**9, 0, 0)
    # The command stops in that one line, before it opens the store.
    store = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["overview", "--prices", "/dev/zero", "--store", store]) == 2
    assert capsys.readouterr().err == (
        "bridge-store: --prices /dev/zero: not a regular file (it is a FIFO, socket or device)\n"
    )


def test_the_version_names_the_content_and_when_it_changed(tmp_path: Path) -> None:
    path = table_file(tmp_path)
    first = load_prices(path).version
    assert first is not None
    os.utime(path, ns=(0, 1_780_000_000_000_000_000))
    again = load_prices(path).version
    assert again is not None
    assert again.digest == first.digest
    assert again.to_json()["modified"] == "2026-05-28 20:26:40 UTC"
    path.write_text(DATED.replace("input = 2\n", "input = 3\n"))
    changed = load_prices(path).version
    assert changed is not None
    assert changed.digest != first.digest
    assert len(changed.digest) == 12


def test_the_book_reads_again_and_keeps_the_last_good_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = table_file(tmp_path)
    book = PriceBook.read(path)
    assert book.table is not None
    assert book.table.currency == "EUR"
    path.write_text(DATED.replace('currency = "EUR"', 'currency = "USD"'))
    assert book.reload()
    assert book.table.currency == "USD"
    assert book.problem is None
    path.write_text(DATED + "[models.bad]\ninput = -1\noutput = 1\n")
    assert not book.reload()
    assert book.table.currency == "USD"  # the last good one stays
    assert book.problem is not None
    assert "models.bad.input" in book.problem
    assert "price table not reloaded, the previous prices stay" in caplog.text
    assert "\n" not in book.problem
    assert PriceBook.read(None).table is None
    assert not PriceBook.read(None).reload()


async def test_a_request_before_the_loop_is_served_once_it_follows(tmp_path: Path) -> None:
    path = table_file(tmp_path)
    book = PriceBook.read(path)
    path.write_text(DATED.replace('currency = "EUR"', 'currency = "GBP"'))
    book.request_reload()  # a SIGHUP before the server's loop runs: remembered
    assert book.table is not None
    assert book.table.currency == "EUR"
    book.follow_on(asyncio.get_running_loop())
    for _ in range(200):
        if book.table.currency == "GBP":
            break
        await asyncio.sleep(0.01)
    assert book.table.currency == "GBP"


async def test_a_change_while_the_server_started_is_read_when_it_follows(tmp_path: Path) -> None:
    # A SIGHUP that came before serve listened for one is lost; the file's change is not.
    path = table_file(tmp_path)
    book = PriceBook.read(path)
    path.write_text(DATED.replace('currency = "EUR"', 'currency = "CHF"'))
    book.follow_on(asyncio.get_running_loop())
    for _ in range(200):
        if book.table is not None and book.table.currency == "CHF":
            break
        await asyncio.sleep(0.01)
    assert book.table is not None
    assert book.table.currency == "CHF"


def test_no_cost_is_ever_a_float() -> None:
    for cost in (0, 1, -1, 10**40, -(10**40), 2**53 * 10**18):
        text = cost_text(cost)
        assert text is not None
        assert not math.isinf(float(text))
        assert json.loads(json.dumps(text)) == text


def test_a_budget_is_for_a_name_a_token_can_have_as_its_tenant() -> None:
    from bridge_store.backend.tenants import TENANT_PATTERN
    from bridge_store.pricing.loader import TENANT_NAME

    assert TENANT_NAME.pattern == TENANT_PATTERN.pattern
