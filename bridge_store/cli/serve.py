"""``bridge-store serve``: the CallStore server under uvicorn, announced by a ready line."""

from __future__ import annotations

import argparse
import os

from .shared.serve_options import add_arguments


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve the CallStore RPC",
        description=(
            "Serve sdk.v1.SdkStoreCallbackService/CallStore over HTTP (Connect protocol). "
            "Prints 'bridge-store ready {JSON}' on stderr once listening."
        ),
    )
    add_arguments(serve)


def run(args: argparse.Namespace) -> int:
    # uvicorn, Starlette, the app and its metrics load only for serve.
    from .shared.serve_run import serve

    return serve(args, os.environ)
