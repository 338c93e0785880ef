"""Regenerate bridge_store/_generated from proto/ with grpcio-tools' bundled protoc.

Usage: python scripts/generate_proto.py [OUTPUT_DIR]   (default: bridge_store/_generated)
tests/test_proto.py runs this into a temporary directory and fails when the committed
code differs, so edit the .proto, run this, and commit both.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_FILES = ["sdk/v1/sdk_store_callback_service.proto"]
PACKAGES = ["sdk", "sdk/v1"]


def generate(output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    well_known = str(resources.files("grpc_tools") / "_proto")
    status = protoc.main(
        [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={output}",
            f"--pyi_out={output}",
            *PROTO_FILES,
        ]
    )
    if status != 0:
        raise SystemExit(f"protoc failed with status {status}")
    for package in ["", *PACKAGES]:
        init = output / package / "__init__.py"
        if not init.exists():
            init.write_text(
                '"""Generated from proto/ by scripts/generate_proto.py; do not edit."""\n'
            )


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bridge_store" / "_generated")
