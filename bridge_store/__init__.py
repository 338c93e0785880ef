"""bridge-store: a Connect CallStore server for Cursor SDK bridge agent history.

``hookimpl`` marks a backend plugin's hook implementations (see :mod:`.hookspecs`).
"""

from .hookspecs import hookimpl

__all__ = ["hookimpl"]
