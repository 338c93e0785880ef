"""Bytes on the wire: message codecs, compression, JSON text and the HTTP guard.

Nothing here knows a store, a token or a tenant; every layer above may import it.
"""
