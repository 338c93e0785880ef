"""``bridge-store export-runs --to URL``: stored runs sent to an OTLP collector as traces."""

from __future__ import annotations

import argparse
import asyncio
import calendar
import os
import re
import sys
import time
from typing import TYPE_CHECKING

from ..errors import BackendUnreachable, ConfigurationError, ConnectError
from ..lifecycle.durations import parse_age
from ..run_traces import EXPORT_RUNS_ENV
from .shared.store_options import add_store_arguments, add_tenants_argument, stack_from
from .shared.wording import counted

if TYPE_CHECKING:
    from ..run_traces.replay import ReplayTally, Selection

_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
DAY_MS = 86_400_000


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "export-runs",
        help="send stored runs to an OpenTelemetry collector as traces",
        description=(
            "Send every ended run (or those --tenant, --agent, --since and --until choose) "
            "to an OTLP/HTTP collector, each as a trace in the OpenTelemetry GenAI "
            "conventions: the run, its tool calls, its tokens. A run is the same trace "
            "every time it is sent, so running this again sends the same traces, not new "
            "ones. Headers (auth) come from OTEL_EXPORTER_OTLP_HEADERS, content from "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (off by default); "
            "see docs/observability.md."
        ),
    )
    parser.add_argument(
        "--to",
        metavar="URL",
        help=(
            "the collector's OTLP/HTTP URL (http://collector:4318; /v1/traces is added "
            f"unless the path ends with it; env {EXPORT_RUNS_ENV})"
        ),
    )
    add_store_arguments(parser, "store to read")
    add_tenants_argument(parser, "send only this tenant's runs")
    parser.add_argument("--agent", metavar="ID", help="send only this agent's runs")
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only runs started since WHEN: an age (30d; s, m, h, d or w) or a UTC day "
        "(YYYY-MM-DD)",
    )
    parser.add_argument(
        "--until",
        metavar="WHEN",
        help="only runs started before WHEN: an age ago, or up to the end of a UTC day",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="send nothing: count the runs, spans and bytes"
    )


def when_ms(text: str, flag: str, *, end_of_day: bool, now: float | None = None) -> int:
    """``--since``/``--until`` as epoch ms: an age before ``now``, or a UTC day's start
    (its end, the next day's start, with ``end_of_day``)."""
    now = time.time() if now is None else now
    day = _DAY.fullmatch(text.strip())
    if day is not None:
        year, month, date = (int(part) for part in day.groups())
        if not (1 <= month <= 12 and 1 <= date <= calendar.monthrange(year, month)[1]):
            raise ConfigurationError(f"{flag} {text}: no such day")
        start = calendar.timegm((year, month, date, 0, 0, 0)) * 1000
        return start + (DAY_MS if end_of_day else 0)
    try:
        return int((now - parse_age(text)) * 1000)
    except ValueError as error:
        raise ConfigurationError(f"{flag}: {error}, or a day as YYYY-MM-DD") from None


def selection_from(args: argparse.Namespace) -> Selection:
    from ..run_traces.replay import Selection

    since = when_ms(args.since, "--since", end_of_day=False) if args.since else None
    until = when_ms(args.until, "--until", end_of_day=True) if args.until else None
    return Selection(args.tenant, args.agent, since, until)


def run(args: argparse.Namespace) -> int:
    from ..run_traces import require_otel

    url = args.to or os.environ.get(EXPORT_RUNS_ENV, "").strip()
    if not url:
        raise ConfigurationError(f"export-runs needs --to URL (or {EXPORT_RUNS_ENV})")
    require_otel("export-runs")
    return asyncio.run(_export(args, url, selection_from(args)))


async def _export(args: argparse.Namespace, url: str, selection: Selection) -> int:
    from ..run_traces.mapping import SpanMaker, TraceSettings
    from ..run_traces.replay import Replay, ReplayTally, count_agents
    from ..run_traces.sender import OtlpSender
    from ..run_traces.settings import traces_endpoint

    endpoint = traces_endpoint(url)  # a bad URL fails before the store opens
    sender = None if args.dry_run else OtlpSender(endpoint)
    started = time.monotonic()
    tally = ReplayTally()
    try:
        async with stack_from(args, sealed=False).opened(migrate=False) as stack:
            replay = Replay(
                stack.stores, SpanMaker(TraceSettings.from_environment()), sender, tally
            )
            try:
                if sys.stderr.isatty():
                    total = await count_agents(stack.stores, selection)
                    with _Bar(tally, total):
                        await replay.run(selection)
                else:
                    await replay.run(selection)
            except ConnectError as error:
                raise BackendUnreachable(
                    f"export-runs stopped reading the store: {error.message}; "
                    f"{counted(tally.runs, 'run')} were sent: run it again"
                ) from error
    finally:
        if sender is not None:
            sender.close()
    print(_summary(tally, sender.shown if sender else None, time.monotonic() - started))
    return 0


def _summary(tally: ReplayTally, shown: str | None, seconds: float) -> str:
    from rich import filesize

    what = (
        f"{counted(tally.runs, 'run')} ({counted(tally.spans, 'span')}, "
        f"{filesize.decimal(tally.bytes)})"
    )
    said = f"sent {what} to {shown}" if shown else f"would send {what} (dry run)"
    said += f" in {seconds:.1f} s"
    if tally.not_ended:
        said += f"; {counted(tally.not_ended, 'run')} not ended yet left out"
    return said


class _Bar:
    """A rich progress bar over the agents, with the runs, spans and bytes so far."""

    def __init__(self, tally: ReplayTally, total: int) -> None:
        from rich import filesize
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._size = filesize.decimal
        self._progress = Progress(
            TextColumn("agents"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[sent]}"),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
        )
        self._task = self._progress.add_task("agents", total=total, sent="")
        self._tally = tally
        tally.changed = self._update

    def _update(self, tally: ReplayTally) -> None:
        sent = (
            f"{counted(tally.runs, 'run')}, {counted(tally.spans, 'span')}, "
            f"{self._size(tally.bytes)}"
        )
        self._progress.update(self._task, completed=tally.agents_done, sent=sent)

    def __enter__(self) -> _Bar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()
