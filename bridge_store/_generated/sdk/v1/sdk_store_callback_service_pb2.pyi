from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallStoreRequest(_message.Message):
    __slots__ = ("substore", "method", "input")
    SUBSTORE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    substore: str
    method: str
    input: _struct_pb2.Struct
    def __init__(self, substore: _Optional[str] = ..., method: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CallStoreResponse(_message.Message):
    __slots__ = ("output",)
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    output: _struct_pb2.Struct
    def __init__(self, output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
