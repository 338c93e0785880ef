"""Jinja2 for the viewer: the package's templates, autoescaped, and the filters they use."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup

from ..pricing.money import COST_SCALE, scaled, shown_money
from ..types import Document
from .agent_rows import shortened
from .charts import layout
from .times import iso_time, shown_duration, shown_offset, shown_time, shown_utc

#: Arguments and results longer than this show their start and a "show all" control.
PREVIEW_CHARS = 2000
#: Events of a block beyond this are not linked from its raw view (raw pages are capped).
RAW_LINK_EVENTS = 1000


def pretty(value: Any) -> str:
    if isinstance(value, jinja2.Undefined):
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def compact(value: Any) -> str:
    if isinstance(value, jinja2.Undefined):
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def error_text(value: Any) -> str:
    """An error as a person reads it: its text, not its JSON.

    Errors are text (``"[permission_denied] HTTP 403"``) or objects; an object's
    ``message`` (with its ``code`` or ``name`` in front, when it has one) is the text,
    and only an object without a message is shown as compact JSON.
    """
    if value is None or isinstance(value, jinja2.Undefined):
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        label = value.get("code", value.get("name"))
        prefix = f"[{label}] " if isinstance(label, str | int) and str(label) else ""
        return prefix + str(value["message"])
    return compact(value)


def preview(value: Any) -> dict[str, Any]:
    text = pretty(value)
    return {"text": text[:PREVIEW_CHARS], "cut": len(text) > PREVIEW_CHARS, "chars": len(text)}


def datetime_attribute(ms: Any) -> Markup:
    """`` datetime="..."`` for a ``<time>`` of a stored time; nothing if it names no date."""
    iso = iso_time(ms)
    return Markup(' datetime="{}"').format(iso) if iso else Markup("")


TOKEN_LABELS = {
    "inputTokens": "Input",
    "outputTokens": "Output",
    "cacheReadTokens": "Cache read",
    "cacheWriteTokens": "Cache write",
    "reasoningTokens": "Reasoning",
    "totalTokens": "Total",
}


def token_label(name: str) -> str:
    return TOKEN_LABELS.get(name, name)


def number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def money(value: Any, currency: str) -> str:
    """A cost as the JSON carries it (decimal text), as a person reads it."""
    if not isinstance(value, str):
        return "-"
    try:
        amount = Decimal(value)
    except InvalidOperation:
        return "-"
    return shown_money(scaled(amount, COST_SCALE), currency)


#: A name or title shown in a page is cut to this many characters: CallStore accepts a
#: name of megabytes, which a list of fifty would repeat fifty times (the document's
#: JSON, on the agent page and ``?format=json``, keeps it whole).
LABEL_CHARS = 200


def label(value: Any) -> str:
    """``value`` on one line, cut to :data:`LABEL_CHARS` characters."""
    return shortened(str(value), LABEL_CHARS)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bridge_store.viewer", "templates"),
        autoescape=True,
        # Documents may lack any field the contract does not require (a run without
        # ``error``, an agent without ``name``): a missing field shows as nothing.
        undefined=jinja2.Undefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pretty=pretty,
        compact=compact,
        error_text=error_text,
        preview=preview,
        when=shown_time,
        when_utc=shown_utc,
        datetime_attribute=datetime_attribute,
        duration=shown_duration,
        offset=shown_offset,
        number=number,
        money=money,
        token_label=token_label,
        label=label,
    )
    env.globals["chart_layout"] = layout
    env.globals.update(query=lambda **params: urlencode({k: v for k, v in params.items() if v}))
    env.globals["RAW_LINK_EVENTS"] = RAW_LINK_EVENTS
    return env


def render_page(template: str, *, title: str, data: Document, base: str, csrf: str) -> str:
    """A whole page; the header's links and sign-out show everywhere but on sign-in."""
    page = environment().get_template(template)
    signed_in = template != "sign_in.html"
    return page.render(title=title, data=data, base=base, csrf=csrf, signed_in=signed_in)


def render_fragment(view: Any, *, base: str) -> str:
    """A transcript page's blocks alone, as the live view and "load more" append them."""
    template = environment().get_template("_blocks.html")
    return template.render(data=view.data, base=base)


def render_run_header(view: Any) -> Document:
    """What a followed run's header shows now: its duration and, once reported, its
    usage table (None keeps the one shown: a page of events may report none)."""
    data = view.data
    run = data["run"]
    took = run.get("durationMs")
    text = shown_duration(took) if took is not None else shown_duration(data.get("elapsedMs"))
    if took is None and data.get("elapsedMs") is not None:
        text += " so far"
    usage = None
    if data.get("usage"):
        usage = environment().get_template("_usage.html").render(data=data)
    return {"duration": text, "usageHtml": usage}
