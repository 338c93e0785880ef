"""The repository's Dockerfile read as instructions, for tests that check it as data."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Dockerfile:
    """The single-stage Dockerfile's instructions, in order, continuations joined."""

    instructions: list[tuple[str, str]]

    @classmethod
    def read(cls, path: Path = ROOT / "Dockerfile") -> Dockerfile:
        joined = re.sub(r"\\\n\s*", " ", path.read_text())
        instructions = []
        for line in joined.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                keyword, _, rest = line.partition(" ")
                instructions.append((keyword.upper(), rest.strip()))
        return cls(instructions)

    def all(self, keyword: str) -> list[str]:
        return [rest for key, rest in self.instructions if key == keyword]

    def last(self, keyword: str) -> str:
        """The instruction's value in force at the end (WORKDIR, USER, CMD ...)."""
        values = self.all(keyword)
        assert values, f"the Dockerfile has no {keyword}"
        return values[-1]

    def exec_form(self, keyword: str) -> list[str]:
        """An ENTRYPOINT, CMD or HEALTHCHECK CMD in exec (JSON) form."""
        value = self.last(keyword)
        if keyword == "HEALTHCHECK":
            value = value.split(" CMD ", 1)[1]
        command = json.loads(value)
        assert isinstance(command, list)
        return [str(part) for part in command]

    @property
    def uid(self) -> int:
        """The numeric user the image runs as (USER uid:gid)."""
        user = self.last("USER").split(":")[0]
        assert user.isdigit(), f"USER {user} is not numeric"
        return int(user)
