"""Moving and keeping history: copy, backup, import, and retention (prune, gc).

Every command here works through the backend API (:mod:`bridge_store.backend.substores`), so
it works for every backend, third-party ones included.

Moving history: a store's history is a stream of items (:mod:`.items`): agents, runs,
pages of a run's events and checkpoint blobs, each tagged with its tenant. Sources
produce them (a store walked through the backend API, an archive, the bridge's own
stores) and a :class:`~.sink.StoreSink` writes them into an opened store,
idempotently, so every command that moves history (copy, import, import-local) is
resumable the same way.
"""
