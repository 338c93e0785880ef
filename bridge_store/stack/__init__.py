"""The store stack: which backend serves which substore (:mod:`.stores`), opened
together and wrapped in the server's layers (:mod:`.layers`)."""
