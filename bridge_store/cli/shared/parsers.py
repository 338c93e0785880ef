"""The command line's parsers: a usage mistake is one line naming the fix.

argparse answers a mistyped flag with the command's whole usage (a dozen lines for
serve) and then the error. Every parser of ``bridge-store`` is a :class:`CommandParser`
instead: one line, the error and where the help is, or a command's own advice for
the mistake (``config --port 18100`` says that options go after ``config show``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

#: A command's advice for a usage mistake: (the arguments it was given, argparse's
#: message) -> the line to print instead, or None for argparse's message.
Advice = Callable[[list[str], str], "str | None"]


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (see the module docstring)."""

    advice: Advice | None = None
    #: The arguments of the latest parse, for the advice.
    _given: tuple[str, ...] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = tuple(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        given = list(self._given)
        advice = self.advice(given, message) if self.advice is not None else None
        line = advice or f"{message} (see {self._command_prog(given)} --help)"
        self.exit(2, f"{self.prog}: {line}\n")

    def _command_prog(self, given: list[str]) -> str:
        """The help to see: the command's, when the mistake is reported here for it (an
        unrecognized argument is only found once the whole line is parsed)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and given:
                command = action.choices.get(given[0])
                if isinstance(command, argparse.ArgumentParser):
                    return (
                        command._command_prog(given[1:])
                        if isinstance(command, CommandParser)
                        else command.prog
                    )
        return self.prog


def advise(parser: argparse.ArgumentParser, advice: Advice) -> None:
    """Give ``parser`` (a :class:`CommandParser`) ``advice`` for its usage mistakes."""
    if isinstance(parser, CommandParser):
        parser.advice = advice
