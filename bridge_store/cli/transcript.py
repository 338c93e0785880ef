"""``bridge-store transcript RUN_ID``: a run as a conversation, or its events, or Markdown."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..viewer import queries
from .shared.read_options import add_read_arguments, run_paging

if TYPE_CHECKING:
    from ..types import Document
    from ..viewer.reader import HistoryReader
    from .shared.read_options import Pages

#: How often ``--follow`` asks for new events, as the bridge's observers do.
FOLLOW_POLL_SECONDS = 0.25


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    transcript = commands.add_parser(
        "transcript",
        help="print a run as a conversation",
        description="Print a run's transcript: prompts, answers, thinking, tool calls, status "
        "changes and token usage (rendered on a terminal, plain lines otherwise).",
    )
    transcript.add_argument("run_id", metavar="RUN_ID", help="the run, as 'runs' lists it")
    transcript.add_argument("--agent", metavar="AGENT_ID", help="the run's agent, if ambiguous")
    transcript.add_argument(
        "--follow", action="store_true", help="keep printing new events until the run ends"
    )
    shape = transcript.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="the stored events as JSON lines")
    shape.add_argument("--markdown", action="store_true", help="the transcript as Markdown")
    add_read_arguments(transcript)


def run(args: argparse.Namespace) -> int:
    return run_paging(_transcript, args)


async def _transcript(pages: Pages, args: argparse.Namespace) -> None:
    from ..viewer.terminal import Output, TranscriptPrinter, json_line

    reader = pages.reader
    run = await queries.find_run(reader, args.run_id, args.agent)
    batches = event_batches(reader, run, follow=args.follow)
    if args.json:
        async for batch in batches:
            for event in batch:
                print(json_line(event))
            sys.stdout.flush()
    elif args.markdown:
        async for _ in batches:
            pass  # with --follow: until the run has ended
        # The viewer's own export (through a server, fetched from it): the same text.
        sys.stdout.write(await pages.markdown(run["agentId"], run["runId"]))
    else:
        printer = TranscriptPrinter(Output(sys.stdout))
        async for batch in batches:
            printer.add(batch)
        printer.finish()


async def event_batches(
    reader: HistoryReader, run: Document, *, follow: bool
) -> AsyncIterator[list[Document]]:
    """A run's stored events as one batch; with ``follow``, then each poll's new ones
    until the run has ended.

    The run is read again before each poll, and its events once more after it is seen
    ended, so events written just before the end are never missed.
    """
    from ..viewer.reader import FULL_PAGE

    after: str | None = None
    backlog: list[Document] = []
    while True:
        page = await reader.events(run["runId"], after=after, limit=FULL_PAGE)
        backlog.extend(page.items)
        if page.items:
            after = page.items[-1]["offset"]
        if page.next is not None:
            continue
        if backlog:
            yield backlog
            backlog = []
        if not follow or not queries.is_live(run):
            return
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
        run = await reader.run(run["agentId"], run["runId"]) or run
