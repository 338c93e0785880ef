"""Where a ``cwd`` sits in a checkout, and the workspace key the store keeps instead.

A key is ``workspace:<id>`` for the checkout's root and ``workspace:<id>//<sub/dir>``
for a directory inside it (``/`` between the parts whatever the caller's system). An id
never holds ``//`` (:func:`check_workspace_id`), so the key splits one way only. Paths
are compared as the caller's system spells them: POSIX, or Windows for a root such as
``C:\\src\\app``.
"""

from __future__ import annotations

import ntpath
import posixpath
import re
from dataclasses import dataclass
from types import ModuleType

from ..errors import invalid_argument

#: What starts every workspace key; no absolute path starts with it.
KEY_PREFIX = "workspace:"
_SUB_SEPARATOR = "//"
#: The longest workspace id, in characters (a normalized remote or a rule's name).
MAX_WORKSPACE_ID = 512
#: The longest checkout root, in bytes of UTF-8 (a cwd's bound, contract.MAX_CWD_BYTES).
MAX_ROOT_BYTES = 2048
_WINDOWS_ROOT = re.compile(r"[A-Za-z]:[\\/]")


@dataclass(frozen=True, slots=True)
class Checkout:
    """One checkout of a workspace: the workspace's id and the checkout's root on the
    machine of the bridge that works in it."""

    workspace: str
    root: str


#: Not a checkout: a reader (the viewer, ``bridge-store agents --store-callback-url``)
#: asking for agents as the store keeps them, keys and all, untranslated.
AS_STORED = Checkout(workspace="", root="")


def check_workspace_id(value: str) -> str:
    """``value`` if it can name a workspace, else invalid_argument saying why."""
    if not _is_workspace_id(value):
        raise invalid_argument(
            f"a workspace id is 1 to {MAX_WORKSPACE_ID} printable characters starting with "
            "a letter or digit"
        )
    if _SUB_SEPARATOR in value or value.endswith("/"):
        raise invalid_argument("a workspace id holds no '//' and does not end with '/'")
    return value


def _is_workspace_id(value: str) -> bool:
    return 0 < len(value) <= MAX_WORKSPACE_ID and value[0].isalnum() and value.isprintable()


def _system(path: str) -> ModuleType | None:
    """The path module of the system that spells ``path`` (None: not absolute)."""
    if path.startswith("/"):
        return posixpath
    if _WINDOWS_ROOT.match(path):
        return ntpath
    return None


def check_root(value: str) -> str:
    """``value`` if it is a checkout root: absolute, normalized, bounded, printable."""
    system = _system(value)
    if system is None:
        raise invalid_argument("a checkout root is an absolute path")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_ROOT_BYTES:
        raise invalid_argument(f"a checkout root is at most {MAX_ROOT_BYTES} bytes")
    if not value.isprintable():
        raise invalid_argument("a checkout root holds no control characters")
    if system.normpath(value) != value:
        raise invalid_argument("a checkout root is a normalized path (no '..', '.' or '//')")
    return value


def inside(root: str, cwd: str) -> str | None:
    """The directory ``cwd`` names inside ``root``, as ``a/b`` ("" for the root itself);
    None when it is outside (``..`` is resolved first, as the path's own system would).
    A symlink is not followed: the server never sees the caller's disk."""
    system = _system(root)
    if system is None or _system(cwd) is not system:
        return None
    normal = system.normpath(cwd)
    if system is ntpath:
        same, base = ntpath.normcase(normal), ntpath.normcase(root)
    else:
        same, base = normal, root
    if same == base:
        return ""
    prefix = base if base.endswith(system.sep) else base + system.sep
    if not same.startswith(prefix):
        return None
    sub: str = normal[len(prefix) :]
    return sub.replace("\\", "/")


def at(root: str, sub: str) -> str:
    """The path of the directory ``sub`` (as :func:`inside` gives it) under ``root``."""
    if not sub:
        return root
    system = _system(root) or posixpath
    joined: str = system.join(root, *sub.split("/"))
    return joined


def key(workspace: str, sub: str) -> str:
    """The ``cwd`` the store keeps for directory ``sub`` of ``workspace``."""
    return KEY_PREFIX + workspace + (_SUB_SEPARATOR + sub if sub else "")


def is_key(cwd: str) -> bool:
    return cwd.startswith(KEY_PREFIX)


def parse_key(cwd: str) -> tuple[str, str] | None:
    """(workspace id, sub directory) of a key; None for anything that is not one a
    server made (a sub directory with ``..``, ``.`` or empty parts never is)."""
    if not cwd.startswith(KEY_PREFIX):
        return None
    workspace, _, sub = cwd[len(KEY_PREFIX) :].partition(_SUB_SEPARATOR)
    if not _is_workspace_id(workspace):
        return None
    if sub and any(part in ("", ".", "..") for part in sub.split("/")):
        return None
    return workspace, sub


def workspace_of(cwd: str) -> str | None:
    """The workspace id a stored ``cwd`` belongs to (None: a plain path)."""
    parsed = parse_key(cwd)
    return None if parsed is None else parsed[0]
