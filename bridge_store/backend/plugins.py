"""The plugin manager factory and backend resolution by URL."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import pluggy

from ..errors import ConfigurationError
from ..urls import redact
from . import hookspecs
from .substores import Backend, BackendOptions

ENTRY_POINT_GROUP = "bridge_store.backends"


def get_plugin_manager(
    *, load_entry_points: bool = True, plugins: Iterable[object] = ()
) -> pluggy.PluginManager:
    """A plugin manager with the backend hook specs.

    ``load_entry_points`` registers every installed backend (built-in ones included,
    through the same entry-point group as third-party ones); ``plugins`` are registered
    as well, e.g. a backend defined by a test or an embedding application.
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    if load_entry_points:
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for plugin in plugins:
        manager.register(plugin)
    return manager


def known_schemes(manager: pluggy.PluginManager) -> list[str]:
    schemes = {scheme for answer in manager.hook.bridge_store_url_schemes() for scheme in answer}
    return sorted(schemes)


def open_backend(
    manager: pluggy.PluginManager, url: str, options: BackendOptions | None = None
) -> Backend:
    """The backend the first plugin claiming ``url`` provides; ConfigurationError if none."""
    if not urlsplit(url).scheme:
        raise ConfigurationError(
            f"store URL {redact(url)!r} has no scheme (e.g. sqlite:///agents.db)"
        )
    backend: Backend | None = manager.hook.bridge_store_open_backend(
        url=url, options=options if options is not None else BackendOptions()
    )
    if backend is None:
        raise ConfigurationError(
            f"no installed backend serves {urlsplit(url).scheme}:// URLs "
            f"(known schemes: {', '.join(known_schemes(manager)) or 'none'})"
        )
    return backend
