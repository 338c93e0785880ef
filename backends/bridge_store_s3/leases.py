"""Leases: one small object per lease, taken and handed over by conditional PUTs.

``<prefix>leases/<name>`` holds the holder's token and when the lease expires (epoch
milliseconds). Taking a free lease is a PUT with ``If-None-Match: *``; taking an
expired one, renewing one's own, or releasing it (writing it back as expired) is a PUT
with ``If-Match`` on the ETag just read. Of two servers racing, S3 lets exactly one
conditional PUT through, so exactly one holds the lease. Expiry compares the servers'
clocks, which NTP keeps far closer than a lease's minutes.
"""

from __future__ import annotations

import json
import time

from ._bucket import Bucket
from .errors import PreconditionFailed
from .keys import Layout, checked

LEASES_DIR = "leases/"


class S3Leases:
    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._bucket = bucket
        self._prefix = layout.prefix + LEASES_DIR

    def key(self, name: str) -> str:
        return checked(self._prefix + name)

    async def acquire(self, name: str, holder: str, seconds: float) -> bool:
        key = self.key(name)
        body = _body(holder, time.time() + seconds)
        current = await self._bucket.get(key)
        try:
            if current is None:
                await self._bucket.put(key, body, if_none_match=True)
                return True
            lease = json.loads(current.body)
            if lease["holder"] != holder and lease["expiresAt"] > time.time() * 1000:
                return False
            await self._bucket.put(key, body, if_match=current.etag)
        except PreconditionFailed:
            return False  # another server's conditional PUT went first
        return True

    async def release(self, name: str, holder: str) -> None:
        key = self.key(name)
        current = await self._bucket.get(key)
        if current is None or json.loads(current.body)["holder"] != holder:
            return
        try:
            await self._bucket.put(key, _body(holder, 0), if_match=current.etag)
        except PreconditionFailed:
            return  # ours expired meanwhile and another server took it: leave theirs


def _body(holder: str, expires_at: float) -> bytes:
    return json.dumps({"holder": holder, "expiresAt": int(expires_at * 1000)}).encode()
