"""The running server in one place: its configuration (:mod:`.config`), the server
object and its ASGI app (:mod:`.app`, :func:`~.app.create_app`), the front page, and
how it is served (:mod:`.run`: under uvicorn, with :mod:`.workers` processes and
:mod:`.tls`, announced as :mod:`.serving` says).

Nothing is imported here, so the CLI reads :mod:`.config` without loading Starlette
or uvicorn.
"""
