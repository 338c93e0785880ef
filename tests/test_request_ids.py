"""Generated request ids: 32 hex digits, never repeated, and a forked worker's are its own."""

from __future__ import annotations

import os
import re
import warnings

from bridge_store.ops.observe import new_request_id


def test_ids_are_32_hex_digits_and_never_repeat() -> None:
    ids = [new_request_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", one) for one in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_child_draws_a_prefix_of_its_own() -> None:
    ours = new_request_id()
    reading, writing = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns of fork() in a process with threads (the suite's); the child
        # only writes one id and leaves.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        os.write(writing, new_request_id().encode())
        os._exit(0)
    os.close(writing)
    theirs = os.read(reading, 64).decode()
    os.close(reading)
    assert os.waitpid(pid, 0)[1] == 0
    assert re.fullmatch(r"[0-9a-f]{32}", theirs)
    assert theirs[:16] != ours[:16]
    assert new_request_id()[:16] == ours[:16]
