"""bridge-store: a Connect CallStore server for Cursor SDK bridge agent history.

``hookimpl`` marks a backend plugin's hook implementations (see :mod:`.hookspecs`).
``__version__`` is the installed distribution's version, so pyproject.toml stays its
one source: ``bridge-store --version`` and serve's ready line report it.
"""

from importlib.metadata import version

from .backend.hookspecs import hookimpl

__version__ = version("bridge-store")

__all__ = ["__version__", "hookimpl"]
