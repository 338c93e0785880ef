"""Money as exact integers, written as decimal text: never a float, never Infinity.

A price is an integer number of :data:`PRICE_SCALE` parts of a currency unit per
million tokens (nine decimals: a price the file gives with more is refused), so a
cost, tokens times price, is an exact integer of :data:`COST_SCALE` parts of a unit,
whatever the token counts (Python integers do not overflow). Costs leave the program
as decimal strings (``"12.345678"``, six decimals, rounded half to even): JSON that
any parser reads exactly, where a float would lose cents and an overflow would print
``Infinity``, which is not JSON.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, localcontext

#: Decimals a price per million tokens may have.
PRICE_DIGITS = 9
PRICE_SCALE = 10**PRICE_DIGITS
PER_TOKENS = 1_000_000
#: A cost is an integer number of these parts of a currency unit.
COST_SCALE = PRICE_SCALE * PER_TOKENS
#: Decimals a cost is written with.
SHOWN_DIGITS = 6
_MICRO = Decimal(1).scaleb(-SHOWN_DIGITS)


def scaled(value: Decimal, scale: int) -> int:
    """``value`` times ``scale`` as an exact integer; ValueError if it has more decimals
    than ``scale`` holds (a price of 0.0000000001 per million tokens is a typo)."""
    with localcontext() as context:
        context.prec = 80  # the largest price or budget taken has well under 40 digits
        product = value * scale
    if product != product.to_integral_value():
        raise ValueError(f"more than {len(str(scale)) - 1} decimals")
    return int(product)


def cost_decimal(cost: int) -> Decimal:
    """A cost (:data:`COST_SCALE` parts) in currency units, rounded to six decimals."""
    with localcontext() as context:
        context.prec = max(40, len(str(abs(cost))) + SHOWN_DIGITS + 2)
        amount: Decimal = (Decimal(cost) / COST_SCALE).quantize(_MICRO, rounding=ROUND_HALF_EVEN)
        return amount


def cost_text(cost: int | None) -> str | None:
    """A cost as JSON carries it: a decimal string with six decimals, None for none."""
    return None if cost is None else f"{cost_decimal(cost):f}"


def shown_money(cost: int | None, currency: str) -> str:
    """A cost as a person reads it: ``1,234.56 USD``; below one unit up to four
    decimals (``0.0042 USD``), and ``< 0.0001 USD`` below that, so a small cost never
    reads as zero; ``-`` for none."""
    if cost is None:
        return "-"
    if cost == 0:
        return f"0.00 {currency}"
    digits = 2 if abs(cost) >= COST_SCALE else 4
    with localcontext() as context:
        context.prec = max(40, len(str(abs(cost))) + digits + 2)
        amount = (Decimal(cost) / COST_SCALE).quantize(
            Decimal(1).scaleb(-digits), rounding=ROUND_HALF_EVEN
        )
    if amount == 0:
        return f"{'-' if cost < 0 else ''}< 0.0001 {currency}"
    return f"{amount:,f} {currency}"


def percent_change(now: int, before: int) -> str | None:
    """How ``now`` compares with ``before`` as text (``+12%``, ``-3%``, ``0%``); None
    when there was nothing before to compare with."""
    if before == 0:
        return None
    change = (now - before) * 100
    # Integer rounding half away from zero, on exact integers: no float, any size.
    quotient, remainder = divmod(abs(change), abs(before))
    if remainder * 2 >= abs(before):
        quotient += 1
    negative = (change < 0) != (before < 0)
    if quotient == 0:
        return "0%"
    return f"{'-' if negative else '+'}{quotient:,}%"
