"""aiobotocore or obstore for the S3 backend? Measures both on the operations it uses.

Starts moto's S3 server in a subprocess on a loopback port, then runs each client in a
child process of its own and reports, per operation, the wall time and the *client
process CPU time* (obstore's Rust threads included). Against a local moto server the
wall time is mostly moto's own; the CPU time is what the client costs the store server,
and it is what decides the choice. The 32 MiB rows also report the child's peak RSS.

    pip install aiobotocore               # obstore comes with the s3 extra
    python bench/s3_clients.py            # a client not installed is reported failed

Operations (those the backend issues): conditional create of a 1 KiB object
(If-None-Match: *), GET, HEAD, a LIST page of 100 keys after a start key, 50 GETs at
once (one list page's fan-out), and a 32 MiB PUT and GET.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

BUCKET = "bench-clients"
REGION = "us-east-1"
#: moto accepts any credentials.
ACCESS_KEY = SECRET_KEY = "bench"  # noqa: S105 (a local moto server)
SMALL = json.dumps({"payload": "x" * 1000}).encode()
BIG = os.urandom(32 * 1024 * 1024)
ROUNDS = 200


class Client(Protocol):
    """The operations under test, for one library."""

    async def start(self, endpoint: str) -> None: ...
    async def close(self) -> None: ...
    async def put_if_absent(self, key: str, body: bytes) -> None: ...
    async def put(self, key: str, body: bytes) -> None: ...
    async def get(self, key: str) -> bytes: ...
    async def head(self, key: str) -> None: ...
    async def list_after(self, prefix: str, start_after: str, count: int) -> list[str]: ...


class Aiobotocore(Client):
    async def start(self, endpoint: str) -> None:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import AioSession

        self._context = AioSession().create_client(
            "s3",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=AioConfig(
                max_pool_connections=64,
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )
        self._client = await self._context.__aenter__()

    async def close(self) -> None:
        await self._context.__aexit__(None, None, None)

    async def put_if_absent(self, key: str, body: bytes) -> None:
        await self._client.put_object(Bucket=BUCKET, Key=key, Body=body, IfNoneMatch="*")

    async def put(self, key: str, body: bytes) -> None:
        await self._client.put_object(Bucket=BUCKET, Key=key, Body=body)

    async def get(self, key: str) -> bytes:
        response = await self._client.get_object(Bucket=BUCKET, Key=key)
        async with response["Body"] as stream:
            data: bytes = await stream.read()
        return data

    async def head(self, key: str) -> None:
        await self._client.head_object(Bucket=BUCKET, Key=key)

    async def list_after(self, prefix: str, start_after: str, count: int) -> list[str]:
        response = await self._client.list_objects_v2(
            Bucket=BUCKET, Prefix=prefix, StartAfter=start_after, MaxKeys=count
        )
        return [item["Key"] for item in response.get("Contents", [])]


class Obstore(Client):
    async def start(self, endpoint: str) -> None:
        from obstore.store import S3Store

        self._obstore = __import__("obstore")
        self._store = S3Store(
            BUCKET,
            endpoint=endpoint,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            virtual_hosted_style_request=False,
            client_options={"allow_http": True, "pool_max_idle_per_host": "64"},
        )

    async def put_if_absent(self, key: str, body: bytes) -> None:
        await self._obstore.put_async(self._store, key, body, mode="create")

    async def put(self, key: str, body: bytes) -> None:
        await self._obstore.put_async(self._store, key, body)

    async def get(self, key: str) -> bytes:
        result = await self._obstore.get_async(self._store, key)
        return bytes(await result.bytes_async())

    async def head(self, key: str) -> None:
        await self._obstore.head_async(self._store, key)

    async def list_after(self, prefix: str, start_after: str, count: int) -> list[str]:
        keys: list[str] = []
        stream = self._obstore.list(
            self._store, prefix=prefix, offset=start_after, chunk_size=count
        )
        async for chunk in stream:
            keys.extend(meta["path"] for meta in chunk)
            if len(keys) >= count:
                break
        return keys[:count]


CLIENTS: dict[str, Callable[[], Client]] = {"aiobotocore": Aiobotocore, "obstore": Obstore}


async def measure(
    results: dict[str, Any], name: str, count: int, work: Callable[[int], Awaitable[Any]]
) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    for index in range(count):
        await work(index)
    results[name] = {
        "ms_wall": (time.perf_counter() - wall) * 1000 / count,
        "ms_cpu": (time.process_time() - cpu) * 1000 / count,
    }


async def run_client(name: str, endpoint: str) -> dict[str, Any]:
    client = CLIENTS[name]()
    await client.start(endpoint)
    prefix = f"{name}/"
    results: dict[str, Any] = {}
    try:
        await client.put(f"{prefix}warm", SMALL)
        await measure(
            results,
            "create 1 KiB (If-None-Match)",
            ROUNDS,
            lambda i: client.put_if_absent(f"{prefix}small/{i:05d}", SMALL),
        )
        await measure(results, "get 1 KiB", ROUNDS, lambda i: client.get(f"{prefix}small/{i:05d}"))
        await measure(results, "head", ROUNDS, lambda i: client.head(f"{prefix}small/{i:05d}"))
        await measure(
            results,
            "list page of 100",
            50,
            lambda i: client.list_after(f"{prefix}small/", f"{prefix}small/{i:05d}", 100),
        )

        async def fan_out(round_: int) -> None:
            await asyncio.gather(
                *(client.get(f"{prefix}small/{round_ * 50 + i:05d}") for i in range(50))
            )

        await measure(results, "50 GETs at once", 4, fan_out)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        await measure(results, "put 32 MiB", 3, lambda i: client.put(f"{prefix}big/{i}", BIG))

        async def get_big(i: int) -> None:
            assert await client.get(f"{prefix}big/{i}") == BIG

        await measure(results, "get 32 MiB", 3, get_big)
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        results["peak RSS growth in 32 MiB rows (MiB)"] = (rss_after - rss_before) / 1024
    finally:
        await client.close()
    return results


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, endpoint
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("moto server did not start")


def create_bucket(endpoint: str) -> None:
    import botocore.session

    botocore.session.get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    ).create_bucket(Bucket=BUCKET)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--client", choices=sorted(CLIENTS))
    parser.add_argument("--endpoint")
    args = parser.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(run_client(args.client, args.endpoint))))
        return

    moto, endpoint = start_moto()
    try:
        create_bucket(endpoint)
        table: dict[str, dict[str, Any]] = {}
        for name in CLIENTS:
            child = subprocess.run(
                [sys.executable, __file__, "--client", name, "--endpoint", endpoint],
                capture_output=True,
                text=True,
            )
            if child.returncode != 0:
                print(f"{name}: failed\n{child.stderr.strip().splitlines()[-1]}")
                continue
            table[name] = json.loads(child.stdout)
    finally:
        moto.terminate()
        moto.wait()

    names = list(table)
    print(f"{'operation':<38}" + "".join(f"{n + ' wall/cpu ms':>26}" for n in names))
    for operation in next(iter(table.values())):
        cells = []
        for name in names:
            value = table[name][operation]
            if isinstance(value, dict):
                cells.append(f"{value['ms_wall']:>12.2f} / {value['ms_cpu']:>8.2f}")
            else:
                cells.append(f"{value:>23.1f}")
        print(f"{operation:<38}" + "".join(f"{cell:>26}" for cell in cells))


if __name__ == "__main__":
    main()
