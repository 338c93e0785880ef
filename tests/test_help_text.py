"""Every command's --help reads right: no doubled words, every argument explained."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from bridge_store.cli import build_parser

#: "the the", "a a": a word repeated across a space or a line break.
DOUBLED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)


def every_parser(
    parser: argparse.ArgumentParser, name: str = "bridge-store"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from every_parser(sub, f"{name} {command}")


def prose(parser: argparse.ArgumentParser) -> Iterator[str]:
    """The sentences of a parser's help: its description, its groups', its arguments'."""
    yield parser.description or ""
    for group in parser._action_groups:
        yield group.description or ""
    for action in parser._actions:
        yield action.help or ""


def test_no_help_repeats_a_word() -> None:
    parsers = list(every_parser(build_parser()))
    assert len(parsers) > 20
    doubled = {
        f"{name}: {match.group(0)}"
        for name, parser in parsers
        for text in prose(parser)
        for match in DOUBLED.finditer(text)
    }
    assert doubled == set()


def test_every_argument_and_command_is_explained() -> None:
    unexplained = [
        f"{name}: {action.dest}"
        for name, parser in every_parser(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert unexplained == []
    undescribed = [
        name
        for name, parser in every_parser(build_parser())
        if name != "bridge-store" and not parser.description
    ]
    assert undescribed == []
