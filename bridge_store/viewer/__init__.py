"""The history viewer: web pages under ``/ui/`` and the ``agents``/``runs``/``transcript`` CLI.

:func:`bridge_store.viewer.app.create_viewer` builds the web app over a running
server's stores. All reads go through :mod:`bridge_store.viewer.reader`; who may read
what is decided in ``app.token_principal`` and ``create_viewer``'s ``context_for``, the
one place a principal's tenant narrows the reads and the search.
"""

from __future__ import annotations

#: Where ``serve`` and ``bridge-store ui`` mount the viewer.
UI_PATH = "/ui"
