"""The request path: a CallStore call from HTTP to a substore and back.

:mod:`.connect` turns HTTP into (substore, method, input) and back; :mod:`.dispatch`
is the method table, which checks each input with :mod:`.contract` (every field a
client can get wrong, once, for every backend) and calls the stores.
"""
