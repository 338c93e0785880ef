"""Launch the real ``cursor-sdk-bridge`` with its agent store on a bridge-store server.

The bridge ships in the ``cursor-sdk`` package (the ``client`` extra). Told with
``--local-store '{"type":"custom"}'`` that the host owns the store, it sends every
store operation to the server named by ``--store-callback-url``. :func:`launch` does
the whole pairing in one step::

    with launch("sqlite:///agents.db", workspace=project) as session:
        agent = session.client.agents.create(
            session.agent_options(model="composer-2", api_key=key)
        )

It starts ``bridge-store serve`` on a free loopback port (or checks an existing store
given ``store_url`` and ``auth_token``), then the bridge, and stops both on exit. The
lower levels are :func:`start_sidecar` (``store``) and :func:`launch_bridge`
(``bridge``); both children are :class:`ReadyProcess` es (``_process``). An
``https://`` store signed by a private CA is trusted through ``trust``. The
``bridge-store bridge`` command is :mod:`bridge_store.cli.bridge`.
"""

from ._process import START_TIMEOUT_SECONDS, ReadyProcess
from .bridge import (
    BRIDGE_BIN_ENV,
    BRIDGE_READY_PREFIX,
    INSTALL_HINT,
    LOCAL_STORE,
    BridgeProcess,
    bridge_argv,
    bridge_endpoint,
    bridge_environment,
    bridge_path,
    launch_bridge,
    local_options,
)
from .session import Session, SessionError, launch
from .store import Sidecar, check_store, sidecar_args, start_serve, start_sidecar

__all__ = [
    "BRIDGE_BIN_ENV",
    "BRIDGE_READY_PREFIX",
    "INSTALL_HINT",
    "LOCAL_STORE",
    "START_TIMEOUT_SECONDS",
    "BridgeProcess",
    "ReadyProcess",
    "Session",
    "SessionError",
    "Sidecar",
    "bridge_argv",
    "bridge_endpoint",
    "bridge_environment",
    "bridge_path",
    "check_store",
    "launch",
    "launch_bridge",
    "local_options",
    "sidecar_args",
    "start_serve",
    "start_sidecar",
]
