"""Which workspace a directory on this machine belongs to, read where it is.

In order: the first configured rule (a path pattern naming a workspace) that matches
the directory or one of its parents, whose match is the checkout's root; else the git
checkout it is in, named by its ``origin`` remote, normalized so that every spelling
of one repository (``git@host:org/app.git``, ``https://host/org/app``,
``ssh://git@host/org/app.git``) is one id, ``host/org/app``; a remote that is a path
on this machine is ``local:<its absolute path>``. Anything else (no git, no
``origin``, git refusing the directory) is no workspace: agents there keep their path.
Credentials a remote URL holds are dropped while parsing and never leave this module.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import subprocess
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from ..errors import ConfigurationError, ConnectError
from .paths import Checkout, check_root, check_workspace_id

#: How long one git command may take before the directory counts as no checkout.
GIT_TIMEOUT_SECONDS = 5.0
#: ``user@host:path``, git's scp-like syntax (a one-letter host is a Windows drive).
_SCP_LIKE = re.compile(r"(?:[^@/:]+@)?(?P<host>[^@/:]{2,}):(?P<path>(?!//).+)")
#: One rule: ``PATTERN=NAME``.
Rule = tuple[str, str]


def parse_rule(text: str) -> Rule:
    """``PATTERN=NAME`` as a rule; ConfigurationError naming the fix otherwise."""
    pattern, separator, name = text.rpartition("=")
    if not separator or not pattern or not name:
        raise ConfigurationError(f"a workspace rule is PATTERN=NAME, not {text!r}")
    return pattern, _rule_name(name)


def _rule_name(name: str) -> str:
    try:
        return check_workspace_id(name)
    except ConnectError as error:
        raise ConfigurationError(f"workspace name {name!r}: {error.message}") from None


def normalized_remote(url: str, root: str) -> str | None:
    """The workspace id of a remote URL (``root``: the checkout a relative local path
    is relative to); None for a URL naming no repository."""
    url = url.strip()
    if not url or any(ord(char) < 32 for char in url):
        return None
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme == "file":
            return _local(parts.path, root)
        try:
            host = (parts.hostname or "").lower()
        except ValueError:
            return None
        path = parts.path
    elif (scp := _SCP_LIKE.fullmatch(url)) is not None and "/" not in scp["host"]:
        host, path = scp["host"].lower(), scp["path"]
    else:
        return _local(url, root)
    path = posixpath.normpath("/" + path.strip("/")).lstrip("/")
    path = path.removesuffix(".git").rstrip("/")
    if not host or not path or path.startswith(".."):
        return None
    return _id(f"{host}/{path}")


def _local(path: str, root: str) -> str | None:
    if not path:
        return None
    absolute = os.path.normpath(os.path.join(root, path))
    name = absolute.replace("\\", "/").removesuffix("/.git").removesuffix(".git")
    return _id("local:" + name.lstrip("/"))


def _id(candidate: str) -> str | None:
    candidate = re.sub("/{2,}", "/", candidate).rstrip("/")
    try:
        return check_workspace_id(candidate)
    except ConnectError:
        return None


def _git(directory: str, *args: str) -> str | None:
    """One git command's output in ``directory``; None if it fails or takes too long."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    try:
        done = subprocess.run(
            ["git", "-C", directory, *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env={**env, "GIT_TERMINAL_PROMPT": "0"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    output = done.stdout.strip()
    return output if done.returncode == 0 and output else None


def _ancestors(path: str) -> Iterable[str]:
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def _by_rule(directory: str, rules: Sequence[Rule]) -> Checkout | None:
    for pattern, name in rules:
        for candidate in _ancestors(directory):
            if fnmatch.fnmatchcase(candidate, pattern):
                return Checkout(name, candidate)
    return None


def checkout_of(directory: str | os.PathLike[str], rules: Sequence[Rule] = ()) -> Checkout | None:
    """The checkout ``directory`` is in (its root is a real path: symlinks resolved);
    None when it is in no workspace."""
    given = os.path.abspath(os.fspath(directory))
    real = os.path.realpath(given)
    for candidate in dict.fromkeys((given, real)):
        found = _by_rule(candidate, rules)
        if found is not None:
            return found
    if not os.path.isdir(real):
        return None
    top = _git(real, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    root = os.path.normpath(os.path.realpath(top))
    remote = _git(root, "config", "--get", "remote.origin.url")
    workspace = None if remote is None else normalized_remote(remote, root)
    if workspace is None:
        return None
    try:
        return Checkout(workspace, check_root(root))
    except ConnectError:
        return None
