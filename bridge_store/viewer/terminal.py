"""History for people at a terminal: ``rich`` tables and a rendered transcript, or plain
text (tab-separated rows, one line per block) when the output is a pipe or a file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..types import Document
from .printable import printable_cell, printable_lines, terminal_json
from .templating import compact, error_text
from .times import shown_duration, shown_time
from .transcript import Block, Text, ToolCall, TranscriptBuilder

#: Arguments, results, unknown messages and table cells are cut to this on a terminal;
#: a pipe, --json or --markdown give them whole.
PREVIEW_CHARS = 400
#: A table's title (an agent's name, for its runs) is cut to this on a terminal.
TITLE_CHARS = 120

#: Columns a terminal table keeps on one line (ids and times), by how their names end.
KEPT_WHOLE = (" id", "(UTC)")
#: The width, borders included, below which a wrapped column is no longer readable:
#: a terminal too narrow to keep ids whole and give every other column this folds all.
NARROWEST_WRAPPED = 10

AGENT_COLUMNS = (
    "updated (UTC)",
    "status",
    "name",
    "last run",
    "tokens",
    "created by",
    "workspace",
    "agent id",
)
RUN_COLUMNS = (
    "turn",
    "status",
    "model",
    "started (UTC)",
    "duration",
    "tokens",
    "started by",
    "error",
    "run id",
)
RUNS_COLUMNS = (
    "started (UTC)",
    "agent",
    "turn",
    "status",
    "model",
    "duration",
    "tokens",
    "started by",
    "workspace",
    "error",
    "run id",
)


def _cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else compact(value)


def agent_row(agent: Document) -> tuple[str, ...]:
    """A row of the agents list (the Agents page's data)."""
    last = agent.get("lastRun") or {}
    total = agent.get("totalTokens")
    return (
        shown_time(agent.get("updatedAt")),
        str(agent.get("status") or "-"),
        str(agent.get("displayName") or agent.get("name") or "-"),
        str(last.get("status") or "-"),
        f"{total:,}" if isinstance(total, int) else "-",
        str(agent.get("createdBy") or "-"),
        str(agent.get("cwd") or "-"),
        str(agent["agentId"]),
    )


def run_row(run: Document) -> tuple[str, ...]:
    """A row of one agent's runs (the agent page's data)."""
    total = run.get("totalTokens")
    return (
        str(run.get("turnNumber")),
        str(run.get("status") or "-"),
        str(run.get("modelId") or "-"),
        shown_time(run.get("at")),
        shown_duration(run.get("durationMs")),
        f"{total:,}" if isinstance(total, int) else "-",
        str(run.get("createdBy") or "-"),
        _cut(error_text(run.get("error")), 120),
        str(run["runId"]),
    )


def runs_row(run: Document) -> tuple[str, ...]:
    """A row of the run list across agents (the Runs page's data)."""
    total = run.get("totalTokens")
    return (
        shown_time(run.get("at")),
        str(run.get("agentName") or run["agentId"]),
        str(run.get("turnNumber")),
        str(run.get("status") or "-"),
        str(run.get("modelId") or "-"),
        shown_duration(run.get("durationMs")),
        f"{total:,}" if isinstance(total, int) else "-",
        str(run.get("createdBy") or "-"),
        str(run.get("cwd") or "-"),
        _cut(error_text(run.get("error")), 120),
        str(run["runId"]),
    )


class Output:
    """Where history goes: a rich console on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO, *, terminal: bool | None = None) -> None:
        self.stream = stream
        self.console = Console(file=stream, force_terminal=terminal, highlight=False)
        self.terminal = self.console.is_terminal if terminal is None else terminal

    def table(self, columns: Iterable[str], rows: Iterable[tuple[str, ...]], title: str) -> None:
        if not self.terminal:
            self.stream.write("\t".join(columns) + "\n")
            for row in rows:
                self.stream.write("\t".join(printable_cell(cell) for cell in row) + "\n")
            return
        # The title names what is listed ("Runs of <the agent's name>"): text, like a
        # cell; cells are cut (a 1 MiB name is a screenful, and Rich takes a second to
        # lay it out), where pipes, --json and --markdown give every cell whole.
        shown = escape(printable_cell(_cut(title, TITLE_CHARS)))
        table = Table(title=shown, title_justify="left", expand=False)
        names = list(columns)
        cells = [tuple(printable_cell(_cut(cell)) for cell in row) for row in rows]
        # An id is copied and pasted, a time read at a glance: each on one line, as wide
        # as its widest, while names and paths wrap into what is left (when enough is).
        whole = {
            number: max((len(row[number]) for row in cells), default=0)
            for number, column in enumerate(names)
            if column.endswith(KEPT_WHOLE)
        }
        needed = sum(width + 3 for width in whole.values())
        needed += (len(names) - len(whole)) * NARROWEST_WRAPPED
        if needed > self.console.width:
            whole = {}
        for number, column in enumerate(names):
            if number in whole:
                table.add_column(column, no_wrap=True, min_width=whole[number])
            else:
                table.add_column(column, overflow="fold")
        for row in cells:
            table.add_row(*map(escape, row))
        self.console.print(table)

    def block(self, block: Block) -> None:
        if self.terminal:
            # Markup around escaped text: the text's control characters are its own.
            self.console.print(*map(printable_lines, _rich_block(block)), sep="\n")
        else:
            self.stream.write(printable_lines(plain_block(block)) + "\n")
        self.stream.flush()

    def tool_update(self, call: ToolCall) -> None:
        """A tool call already shown has moved on (followed runs only)."""
        line = f"{call.name} -> {call.status}"
        if call.result is not None:
            line += f": {_cut(_value(call.result))}"
        line = printable_lines(line)
        if self.terminal:
            self.console.print(f"[bold]⚙ {escape(line)}[/bold]")
        else:
            self.stream.write(f"tool {line}\n")
        self.stream.flush()


def plain_block(block: Block) -> str:
    if isinstance(block, Text):
        label: str = block.kind
        if block.kind == "thinking" and block.duration_ms is not None:
            label += f" ({shown_duration(block.duration_ms)})"
        return f"{label}: {block.text}"
    if isinstance(block, ToolCall):
        parts = [f"tool {block.name} [{block.status}]"]
        if block.args is not None:
            parts.append(f"args: {_cut(_value(block.args))}")
        if block.result is not None:
            parts.append(f"result: {_cut(_value(block.result))}")
        return "\n  ".join(parts)
    data = block.to_json()
    if block.kind == "status":
        return f"status {data['status']}" + (f": {data['message']}" if data["message"] else "")
    if block.kind == "request":
        return f"request {data['requestId']}"
    if block.kind == "usage":
        return "usage " + ", ".join(f"{k} {v}" for k, v in data["usage"].items())
    return f"{data['label']}: {_cut(compact(data['value']))}"


def _rich_block(block: Block) -> list[str]:
    if isinstance(block, Text):
        if block.kind == "thinking":
            took_ms = block.duration_ms
            took = f" for {shown_duration(took_ms)}" if took_ms is not None else ""
            first = block.text.strip().splitlines()[0] if block.text.strip() else ""
            return [f"[dim italic]thinking{took}: {escape(_cut(first, 120))}[/dim italic]"]
        style = {"user": "bold cyan", "assistant": "bold green", "task": "bold magenta"}[block.kind]
        return [f"[{style}]{block.kind}[/{style}]", escape(block.text), ""]
    if isinstance(block, ToolCall):
        style = _status_style(block.status)
        lines = [f"[bold]⚙ {escape(block.name)}[/bold] [{style}]{escape(block.status)}[/]"]
        if block.args is not None:
            lines.append(f"  [dim]args[/dim] {escape(_cut(_value(block.args)))}")
        if block.result is not None:
            lines.append(f"  [dim]result[/dim] {escape(_cut(_value(block.result)))}")
        return lines
    text = escape(plain_block(block))
    if block.kind == "status":
        return [f"[{_status_style(block.to_json()['status'])}]● {text}[/]"]
    return [f"[dim]{text}[/dim]"]


def _status_style(status: str) -> str:
    status = status.lower()
    if status in ("error", "cancelled", "expired"):
        return "red"
    if status in ("finished", "completed"):
        return "green"
    return "yellow"


class TranscriptPrinter:
    """Prints blocks as they settle, for ``transcript`` and ``transcript --follow``.

    A text block can still grow while its run streams, so the last block is printed
    only once another follows or the run ends; a tool call printed while running is
    printed again, as an update, when its status changes.
    """

    def __init__(self, output: Output) -> None:
        self.output = output
        self.builder = TranscriptBuilder()
        self._printed = 0
        self._shown_status: dict[str, str] = {}

    def add(self, events: Iterable[Document]) -> None:
        self.builder.extend(events)
        self._print(final=False)

    def finish(self) -> None:
        self._print(final=True)

    def _print(self, *, final: bool) -> None:
        blocks = self.builder.blocks
        for call_id, shown in list(self._shown_status.items()):
            call = self.builder.calls[call_id]
            if call.status != shown:
                self._shown_status[call_id] = call.status
                self.output.tool_update(call)
        settled = len(blocks)
        if not final and blocks and isinstance(blocks[-1], Text):
            settled -= 1
        for block in blocks[self._printed : settled]:
            self.output.block(block)
            if isinstance(block, ToolCall):
                self._shown_status[block.call_id] = block.status
        self._printed = max(self._printed, settled)


def json_line(value: Any) -> str:
    """One line of ``--json`` output (see :func:`~.printable.terminal_json`)."""
    return terminal_json(value)
