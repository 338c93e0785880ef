"""The committed generated code matches proto/, and the proto matches the wire contract."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

from bridge_store._generated.sdk.v1 import sdk_store_callback_service_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "bridge_store" / "_generated"


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_proto.py"), str(tmp_path)], check=True
    )
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(GENERATED)
        for p in GENERATED.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert fresh == committed
    stale = [
        str(path)
        for path in fresh
        if not filecmp.cmp(tmp_path / path, GENERATED / path, shallow=False)
    ]
    assert not stale, f"regenerate with scripts/generate_proto.py: {stale} differ"


def test_messages_carry_the_contract_field_numbers() -> None:
    proto = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(proto)
    assert proto.package == "sdk.v1"
    fields = {
        message.name: {(field.name, field.number, field.type_name) for field in message.field}
        for message in proto.message_type
    }
    assert fields == {
        "CallStoreRequest": {
            ("substore", 1, ""),
            ("method", 2, ""),
            ("input", 3, ".google.protobuf.Struct"),
        },
        "CallStoreResponse": {("output", 1, ".google.protobuf.Struct")},
    }
    (service,) = proto.service
    assert service.name == "SdkStoreCallbackService"
    (method,) = service.method
    assert (method.name, method.input_type, method.output_type) == (
        "CallStore",
        ".sdk.v1.CallStoreRequest",
        ".sdk.v1.CallStoreResponse",
    )
