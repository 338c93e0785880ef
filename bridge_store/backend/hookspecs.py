"""Hook specifications: the seam a storage backend plugs into.

A backend is a pluggy plugin (a module or object with ``@hookimpl`` functions),
registered through the ``bridge_store.backends`` entry-point group. The built-in
backends are registered exactly that way.
"""

from __future__ import annotations

import pluggy

from .substores import Backend, BackendOptions

PROJECT = "bridge_store"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def bridge_store_url_schemes() -> list[str]:  # type: ignore[empty-body]
    """The URL schemes this plugin serves, e.g. ``["redis", "rediss"]``.

    Used for help and for the error a user sees when no plugin claims a URL. Every
    plugin's answer is collected.
    """


@hookspec(firstresult=True)
def bridge_store_open_backend(url: str, options: BackendOptions) -> Backend | None:
    """An (unstarted) :class:`~bridge_store.backend.substores.Backend` for ``url``, or None.

    ``options`` (:class:`~bridge_store.backend.substores.BackendOptions`) are the server's
    defaults for every backend, such as how long one wait on it may take; parameters
    in ``url`` take precedence. An implementation may leave the argument out of its
    signature (pluggy passes only what a hook names) and keep its own defaults.

    Return None when the URL's scheme is not yours so the next plugin is asked; the
    first non-None answer wins (``firstresult``). Raise
    :class:`~bridge_store.errors.ConfigurationError` when the URL is yours but wrong
    (a bad parameter, a missing optional dependency: say which extra to install).
    Do not connect here: the server calls ``Backend.start`` when it starts serving.
    """
