"""Redis failures as the Connect errors a client can act on."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis.exceptions import (
    AuthenticationError,
    ClusterError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge_store.errors import (
    BackendUnreachable,
    Code,
    ConfigurationError,
    ConnectError,
    unavailable,
)

P = ParamSpec("P")
T = TypeVar("T")


class NotReplicated(RedisError):
    """A write the primary applied but fewer replicas than ``wait_replicas`` confirmed
    in time (:mod:`.cluster`)."""


def redis_errors(method: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Report outages as ``unavailable`` (the call may be retried) instead of a trace.

    Connection refused, reset or timed out, a server still loading its data set, no
    free pooled connection, or a replica that cannot take writes: all mean "not now".
    So do a cluster's: CLUSTERDOWN, TRYAGAIN, slots without a node or a map of the
    slots that cannot be read (all during a failover), a call that outlived the
    backend timeout, a write fewer replicas confirmed than ``wait_replicas`` asks.
    """

    @functools.wraps(method)
    async def mapped(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except (RedisConnectionError, RedisTimeoutError) as error:
            raise unavailable(f"Redis is unavailable: {error}") from None
        except (ClusterError, TryAgainError, SlotNotCoveredError) as error:
            raise unavailable(f"the Redis Cluster is unavailable: {error}") from None
        except RedisClusterException as error:
            if not _topology_problem(error):
                raise
            raise unavailable(f"the Redis Cluster is unavailable: {error}") from None
        except TimeoutError:
            # The bound the cluster client puts on each command (its own retries and
            # redirections included), as asyncio raises it.
            raise unavailable("Redis did not answer within the backend timeout") from None
        except NotReplicated as error:
            raise unavailable(f"Redis could not replicate the write in time: {error}") from None
        except RuntimeError as error:
            # uvloop refuses a write to a connection Redis has just reset ("unable to
            # perform operation on <TCPTransport closed=True ...>; the handler is
            # closed") with a RuntimeError that redis-py lets through: a lost
            # connection like any other. Other RuntimeErrors are bugs, left as they are.
            if not _closed_transport(error):
                raise
            raise unavailable("Redis is unavailable: the connection was closed") from None
        except ReadOnlyError:
            raise unavailable("Redis is read-only (a replica, or a failover in progress)") from None
        except OutOfMemoryError:
            raise ConnectError(
                Code.RESOURCE_EXHAUSTED, "Redis is out of memory (maxmemory reached)"
            ) from None

    return mapped


#: What redis-py's cluster client says when it cannot build a map of the slots (every
#: seed node down, slots briefly without a primary during a failover): outages. Its
#: other RedisClusterExceptions are misuse, left as they are.
_TOPOLOGY = ("cannot be connected", "not covered", "could not agree")


def _topology_problem(error: RedisClusterException) -> bool:
    return any(words in str(error) for words in _TOPOLOGY)


def _closed_transport(error: RuntimeError) -> bool:
    message = str(error)
    return "closed=True" in message or "handler is closed" in message


def startup_error(
    where: str, db: int, error: RedisError | RedisClusterException
) -> ConfigurationError:
    """What stops the start of ``where`` (``Redis at host:port``), with the fix.

    A server that could not be reached gives a
    :class:`~bridge_store.errors.BackendUnreachable`, which may mend itself.
    """
    message = str(error).strip() or type(error).__name__
    if isinstance(error, AuthenticationError) or "NOAUTH" in message or "WRONGPASS" in message:
        return ConfigurationError(
            f"{where} refused the login ({message}): check the user and password in the "
            "store URL (redis://USER:PASSWORD@HOST/...)"
        )
    if "DB index is out of range" in message:
        return ConfigurationError(
            f"{where} has no database {db} ({message}): use a number below its "
            "`databases` setting (16 unless configured) in the store URL"
        )
    if "CERTIFICATE_VERIFY_FAILED" in message or "WRONG_VERSION_NUMBER" in message:
        return ConfigurationError(
            f"{where} failed the TLS handshake ({message}): check rediss:// against redis://, "
            "and ssl_ca_certs (the CA that signed the server's certificate) in the store URL"
        )
    if "Cluster mode is not enabled" in message:
        return ConfigurationError(
            f"{where} is not a Redis Cluster ({message}): use redis:// for a standalone "
            "Redis, redis+cluster:// for the nodes of a cluster"
        )
    unreachable = isinstance(error, RedisConnectionError | RedisTimeoutError | ClusterError)
    if unreachable or (isinstance(error, RedisClusterException) and _topology_problem(error)):
        return BackendUnreachable(
            f"cannot reach {where} ({message}): is Redis running, and are the host and "
            "port in the store URL right?"
        )
    return ConfigurationError(f"cannot start the store at {where}: {message}")
