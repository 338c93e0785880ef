"""A sample team's history, to see the viewer and the CLI at work without a Cursor key.

:mod:`.stories` tells what five people of two tenants had their agents do over two
weeks (in the terms of :mod:`.script`; the long run in :mod:`.long_run`);
:mod:`.history` turns that into the documents and events a bridge would have stored
(the SDK messages of :mod:`.messages`), deterministic given a seed; :mod:`.fill`
writes it into a store through the same stack ``import`` uses. ``bridge-store demo``
(:mod:`bridge_store.cli.demo`) fills a store and serves it.
"""

#: The seed of ``bridge-store demo`` and of the suite's sample stores.
DEFAULT_SEED = 2026
