"""Moving and keeping history: copy, backup, import, and retention (prune, gc).

Every command here works through the backend API (:mod:`bridge_store.substores`), on
the backends themselves below the sealing layer, so it works for every backend,
third-party ones included.
"""
