"""The backend API: everything a storage backend plugin implements and builds with,
to be read alone.

- :mod:`.substores`: the substore protocols and :class:`~.substores.Backend`, what a
  backend must implement (every method's contract is in its docstring).
- :mod:`.hookspecs` and :mod:`.plugins`: how a plugin registers a URL scheme and is
  found (``hookimpl`` is also ``bridge_store.hookimpl``).
- :mod:`.features`: what a backend may add (readiness, pool figures, leases, an export
  queue, a search index), and the summaries of :mod:`.history`, :mod:`.statistics` and
  :mod:`.shares` it may keep itself.
- :mod:`.stored_documents` and :mod:`.sort_keys`: reading back what it stored, and the
  sort keys of list order.

Besides these, a backend needs :mod:`bridge_store.errors` (the errors it raises) and
:mod:`bridge_store.wire` (how documents become bytes; the fields' rules). The
conformance suite every backend passes is :mod:`bridge_store.conformance`.
"""
