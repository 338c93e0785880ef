"""A run's events as a conversation: the blocks a person reads, built from the event log.

The bridge stores one event per streamed SDK message (``shared/EVENTS.md``): text
arrives as deltas, a tool call as several events sharing a ``call_id``, thinking as
deltas closed by an empty event carrying its duration. :class:`TranscriptBuilder`
folds them, in order, into blocks: consecutive deltas of one kind joined, tool calls
grouped by ``call_id`` at the place they started, and anything it does not know kept
whole as an :class:`Other` block, so an unknown message never breaks a transcript.

The builder can start anywhere in the log: a transcript read a page at a time is the
same blocks as one read whole, except that a block cut by a page boundary arrives in
two parts (the page's ``continues`` and the blocks' ``key`` let a reader join them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..types import Document
from .times import stored_integer

TextKind = Literal["user", "assistant", "thinking", "task"]

#: The message types of ``shared/EVENTS.md`` this module renders; others are Other.
KNOWN_TYPES = frozenset(
    {"request", "status", "user", "assistant", "thinking", "tool_call", "task", "usage"}
)

USAGE_FIELDS = (
    "inputTokens",
    "outputTokens",
    "cacheReadTokens",
    "cacheWriteTokens",
    "reasoningTokens",
    "totalTokens",
)


@dataclass
class Text:
    """Prose from one speaker; deltas of the same kind in a row are one block."""

    kind: TextKind
    text: str
    seqs: list[int]
    #: How long the model thought (thinking blocks, once the closing event arrived).
    duration_ms: int | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}-{self.seqs[0]}"

    def to_json(self) -> Document:
        out: Document = {"kind": self.kind, "key": self.key, "seqs": self.seqs, "text": self.text}
        if self.kind == "thinking":
            out["durationMs"] = self.duration_ms
        return out


@dataclass
class ToolCall:
    """One tool call: the model's request and the execution's events, grouped by id."""

    call_id: str
    name: str
    status: str
    args: Any
    result: Any
    seqs: list[int]
    truncated: dict[str, bool] = field(default_factory=dict)
    kind: Literal["tool_call"] = "tool_call"

    @property
    def key(self) -> str:
        return f"call-{self.call_id}"

    def to_json(self) -> Document:
        return {
            "kind": self.kind,
            "key": self.key,
            "seqs": self.seqs,
            "callId": self.call_id,
            "name": self.name,
            "status": self.status,
            "args": self.args,
            "result": self.result,
            "truncated": self.truncated,
        }


@dataclass
class Status:
    """A change of the run's status, with the error text when it failed."""

    status: str
    message: str
    seqs: list[int]
    kind: Literal["status"] = "status"

    @property
    def key(self) -> str:
        return f"status-{self.seqs[0]}"

    def to_json(self) -> Document:
        return {
            "kind": self.kind,
            "key": self.key,
            "seqs": self.seqs,
            "status": self.status,
            "message": self.message,
        }


@dataclass
class Request:
    request_id: str
    seqs: list[int]
    kind: Literal["request"] = "request"

    @property
    def key(self) -> str:
        return f"request-{self.seqs[0]}"

    def to_json(self) -> Document:
        return {"kind": self.kind, "key": self.key, "seqs": self.seqs, "requestId": self.request_id}


@dataclass
class Usage:
    """Token counts reported during the run (camelCase keys as the SDK sends them)."""

    usage: dict[str, int]
    seqs: list[int]
    kind: Literal["usage"] = "usage"

    @property
    def key(self) -> str:
        return f"usage-{self.seqs[0]}"

    def to_json(self) -> Document:
        return {"kind": self.kind, "key": self.key, "seqs": self.seqs, "usage": self.usage}


@dataclass
class Other:
    """An event this module does not render (unknown type, other envelope): kept whole."""

    label: str
    value: Any
    seqs: list[int]
    kind: Literal["other"] = "other"

    @property
    def key(self) -> str:
        return f"other-{self.seqs[0]}"

    def to_json(self) -> Document:
        return {
            "kind": self.kind,
            "key": self.key,
            "seqs": self.seqs,
            "label": self.label,
            "value": self.value,
        }


Block = Text | ToolCall | Status | Request | Usage | Other


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def message_of(event: Document) -> Document | None:
    """The SDK message an event carries, or None when it is not a stored stream message."""
    payload = event.get("payload")
    if not isinstance(payload, dict) or payload.get("type") != "sdk_message":
        return None
    message = payload.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return None
    return message


def usage_counts(value: Any) -> dict[str, int] | None:
    """The integer token counts of a usage object, in a fixed order; None if none."""
    if not isinstance(value, dict):
        return None
    counts = {
        name: int(value[name])
        for name in USAGE_FIELDS
        if isinstance(value.get(name), int | float) and not isinstance(value.get(name), bool)
    }
    return counts or None


def _text_of(content: Any) -> list[Document]:
    """Content items of a user or assistant message (a bare string counts as text)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [item for item in content if isinstance(item, dict)]
    return []


@dataclass
class TranscriptBuilder:
    """Folds events, in seq order, into blocks. Feed it with :meth:`add`."""

    blocks: list[Block] = field(default_factory=list)
    #: The latest reported usage and status, for a run's summary.
    usage: dict[str, int] | None = None
    status: str | None = None
    #: Tool calls by id, each also in ``blocks`` where it started.
    calls: dict[str, ToolCall] = field(default_factory=dict)
    #: When each block began (its first event's ``createdAt``), by block key; and when
    #: each tool call ended (the event that completed or failed it).
    began: dict[str, int] = field(default_factory=dict)
    ended: dict[str, int] = field(default_factory=dict)

    def extend(self, events: Iterable[Document]) -> TranscriptBuilder:
        for event in events:
            self.add(event)
        return self

    def add(self, event: Document) -> None:
        shown = len(self.blocks)
        self._fold(event)
        at = event.get("createdAt")
        if isinstance(at, int) and not isinstance(at, bool):
            for block in self.blocks[shown:]:
                self.began.setdefault(block.key, at)
            message = message_of(event)
            if message is not None and message.get("type") == "tool_call":
                call = self.calls.get(str(message.get("call_id", message.get("callId"))))
                if call is not None and message.get("status") in ("completed", "error"):
                    self.began.setdefault(call.key, at)
                    self.ended[call.key] = at

    def json(self) -> list[Document]:
        """Every block as JSON, with its time (``at``) and a tool call's ``durationMs``."""
        return [self.block_json(block) for block in self.blocks]

    def block_json(self, block: Block) -> Document:
        out = block.to_json()
        out["at"] = began = self.began.get(block.key)
        if isinstance(block, ToolCall):
            ended = self.ended.get(block.key)
            out["endedAt"] = ended
            out["durationMs"] = ended - began if ended is not None and began is not None else None
        return out

    def _fold(self, event: Document) -> None:
        seq = event.get("seq")
        seq = seq if isinstance(seq, int) else 0
        message = message_of(event)
        if message is None:
            label = str(event.get("eventType") or "event")
            self.blocks.append(Other(label, event.get("payload"), [seq]))
            return
        kind = message["type"]
        if kind not in KNOWN_TYPES:
            self.blocks.append(Other(kind, message, [seq]))
        elif kind in ("user", "assistant"):
            self._conversation(kind, message, seq)
        elif kind == "thinking":
            self._thinking(message, seq)
        elif kind == "task":
            self._text("task", str(message.get("text") or ""), seq, join=False)
        elif kind == "tool_call":
            self._tool_call(message, seq)
        elif kind == "status":
            self.status = str(message.get("status") or "")
            text = message.get("message")
            said = "" if text is None or text == "" else text
            said = said if isinstance(said, str) else compact_json(said)
            self.blocks.append(Status(self.status, said, [seq]))
        elif kind == "request":
            self.blocks.append(Request(str(message.get("request_id") or ""), [seq]))
        else:  # usage
            counts = usage_counts(message.get("usage"))
            if counts is None:
                self.blocks.append(Other(kind, message, [seq]))
            else:
                self.usage = counts
                self.blocks.append(Usage(counts, [seq]))

    def _text(self, kind: TextKind, text: str, seq: int, *, join: bool = True) -> None:
        last = self.blocks[-1] if self.blocks else None
        if join and isinstance(last, Text) and last.kind == kind and last.duration_ms is None:
            last.text += text
            last.seqs.append(seq)
        else:
            self.blocks.append(Text(kind, text, [seq]))

    def _conversation(self, kind: TextKind, message: Document, seq: int) -> None:
        body = message.get("message")
        content = body.get("content") if isinstance(body, dict) else None
        items = _text_of(content)
        if not items:
            self.blocks.append(Other(kind, message, [seq]))
        for item in items:
            if item.get("type") == "text":
                self._text(kind, str(item.get("text") or ""), seq)
            elif item.get("type") == "tool_use" and isinstance(item.get("id"), str):
                self._call(item["id"], seq, name=item.get("name"), args=item.get("input"))
            else:
                self.blocks.append(Other(f"{kind} {item.get('type', 'content')}", item, [seq]))

    def _thinking(self, message: Document, seq: int) -> None:
        text = str(message.get("text") or "")
        duration = message.get("thinking_duration_ms", message.get("thinkingDurationMs"))
        duration = stored_integer(duration)
        if text or duration is None:
            self._text("thinking", text, seq)
        last = self.blocks[-1] if self.blocks else None
        if duration is not None:
            if isinstance(last, Text) and last.kind == "thinking" and last.duration_ms is None:
                last.duration_ms = duration
                if last.seqs[-1] != seq:
                    last.seqs.append(seq)
            else:
                self.blocks.append(Text("thinking", text, [seq], duration_ms=duration))

    def _tool_call(self, message: Document, seq: int) -> None:
        call_id = message.get("call_id", message.get("callId"))
        if not isinstance(call_id, str) or not call_id:
            self.blocks.append(Other("tool_call", message, [seq]))
            return
        call = self._call(
            call_id,
            seq,
            name=message.get("name"),
            args=message.get("args"),
            result=message.get("result"),
            status=message.get("status"),
        )
        truncated = message.get("truncated")
        if isinstance(truncated, dict):
            call.truncated.update({k: bool(v) for k, v in truncated.items()})

    def _call(
        self,
        call_id: str,
        seq: int,
        *,
        name: Any,
        args: Any,
        result: Any = None,
        status: Any = None,
    ) -> ToolCall:
        call = self.calls.get(call_id)
        if call is None:
            call = ToolCall(
                call_id, str(name or "tool"), str(status or "requested"), args, result, []
            )
            self.calls[call_id] = call
            self.blocks.append(call)
        else:
            if name:
                call.name = str(name)
            if status:
                call.status = str(status)
            if args is not None:
                call.args = args
            if result is not None:
                call.result = result
        if seq not in call.seqs:
            call.seqs.append(seq)
        return call


def build(events: Iterable[Document]) -> TranscriptBuilder:
    return TranscriptBuilder().extend(events)
