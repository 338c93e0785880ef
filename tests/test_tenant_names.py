"""One tenant name rule (``backend.tenants.TENANT_PATTERN``), enforced wherever a name
enters: every command's ``--tenant``, the tokens file and ``token add``, and what
moves history (archives, a bridge's own store, another store; see
tests/test_archive_hostile.py and tests/test_lifecycle_checks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge_store.backend.tenants import TENANT_PATTERN, check_tenant
from bridge_store.cli import main
from bridge_store.security.tokens_file import load_entries

#: The names issue 21 saw written, and more of the same kind.
BAD_NAMES = ["../../x", "", "Team", "team-a}:blob:Q", "a/b", "a*", "x" * 64, "é"]
RULE = "1-63 characters of a-z, 0-9, '-' and '_'"


def commands(tmp_path: Path) -> dict[str, list[str]]:
    store = ["--store", f"sqlite:///{tmp_path / 'store.db'}"]
    return {
        "copy": ["copy", "--from", store[1], "--to", f"sqlite:///{tmp_path / 't.db'}"],
        "export": ["export", *store, "--output", str(tmp_path / "out.tar.gz")],
        "import": ["import", *store, "--input", str(tmp_path / "in.tar.gz")],
        "import-local": ["import-local", *store, "--jsonl", str(tmp_path)],
        "prune": ["prune", *store, "--older-than", "90d"],
        "gc": ["gc", *store],
        "agents": ["agents", *store],
        "runs": ["runs", *store, "agent-1"],
        "transcript": ["transcript", *store, "run-1"],
        "token add": [
            "token",
            "add",
            "alice",
            "--scope",
            "read",
            "--tokens-file",
            str(tmp_path / "tokens.toml"),
        ],
    }


COMMANDS = ["copy", "export", "import", "import-local", "prune", "gc", "agents", "runs"]
COMMANDS += ["transcript", "token add"]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_tenant_flag_takes_only_names_the_rule_allows(
    command: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = [*commands(tmp_path)[command], "--tenant", name]
    try:
        status = main(arguments)
    except SystemExit as exit_:  # argparse refuses it with its usage line
        status = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    assert RULE in err, err
    # Nothing was opened or created for a refused name.
    assert sorted(path.name for path in tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_tokens_file_takes_only_names_the_rule_allows(name: str, tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        f'[[token]]\nname = "alice"\nsha256 = "{"0" * 64}"\ntenant = "{quoted}"\nscope = "read"\n'
    )
    with pytest.raises(Exception, match="tenant must be 1-63 characters"):
        load_entries(path)


def test_the_rule_is_one_pattern_and_names_it() -> None:
    assert TENANT_PATTERN.pattern == "[a-z0-9][a-z0-9_-]{0,62}"
    for name in BAD_NAMES:
        with pytest.raises(ValueError, match=RULE):
            check_tenant(name)
