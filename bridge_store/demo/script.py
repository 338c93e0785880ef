"""What a sample agent did, as data: its turns, each turn's prompt, thinking and steps.

:mod:`.stories` writes a team's agents in these terms; :mod:`.history` turns them into
the documents and events a bridge would have stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..types import Document


class Ending(Enum):
    """How a turn's run ended (the run document's status)."""

    FINISHED = "finished"
    ERROR = "error"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool call with its arguments and result; ``failed`` when the tool reported an error."""

    name: str
    args: Document
    result: str
    failed: bool = False


#: A step of a turn: the assistant's text, or a tool call.
Step = str | Tool


@dataclass(frozen=True, slots=True)
class Turn:
    """One run: the prompt, what the model thought, its steps, and how it ended.

    The last text step of a finished turn is its answer. ``error`` is the run's error
    text when it ended in error; ``summary`` the task summary a finished run reports.
    ``after_hours`` is how long after the previous turn ended this one starts.
    """

    prompt: str
    thinking: str
    steps: tuple[Step, ...]
    ending: Ending = Ending.FINISHED
    error: str | None = None
    summary: str | None = None
    after_hours: float = 0.5


@dataclass(frozen=True, slots=True)
class Story:
    """One agent: who made it (a token name) in which tenant, where, on which model,
    how many days ago its first turn began, and its turns."""

    name: str
    creator: str
    tenant: str
    cwd: str
    model: str
    days_ago: float
    turns: tuple[Turn, ...]
    archived: bool = False


def read(path: str, text: str) -> Tool:
    return Tool("read_file", {"path": path}, text)


def edit(path: str, change: str) -> Tool:
    return Tool("edit_file", {"path": path, "instructions": change}, f"Applied the edit to {path}")


def run(command: str, output: str, *, failed: bool = False) -> Tool:
    return Tool("run_terminal_cmd", {"command": command}, output, failed)


def grep(pattern: str, output: str) -> Tool:
    return Tool("grep_search", {"query": pattern}, output)


def numbered(lines: str, first: int = 1) -> str:
    """A file's lines as read_file shows them: each with its number."""
    return "\n".join(
        f"{number:4} | {line}" for number, line in enumerate(lines.splitlines(), first)
    )
