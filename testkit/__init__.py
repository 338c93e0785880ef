"""Test infrastructure that the tests and the benchmarks share; not part of the product.

Throwaway services (free ports, Postgres databases and templates, Redis key prefixes,
a moto S3 server: ``services``), a private Postgres primary and standby
(``pg_cluster``), the stand-in Cursor API the real bridge talks to (``cursor_api``, the
product's own offline one under the suite's names),
an ASGI app on uvicorn in a thread (``inprocess``), plain CallStore calls
(``callstore``), append-load threads and their audit (``appenders``) and a Postgres
round-trip counter (``round_trips``).

``tests/`` and ``bench/`` import it; it imports neither, and ``bridge_store`` and the
backends never import it (tests/test_layout.py checks all three). It is left out of
the wheel: pyproject's setuptools ``packages`` lists the product only.
"""
