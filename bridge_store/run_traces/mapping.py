"""A run as OpenTelemetry spans: one trace, the run as its root, each tool call a child.

The root is ``invoke_agent {agent name}`` with the run's model, usage and outcome; each
tool call its events record (grouped by ``call_id``, as the viewer groups them) is an
``execute_tool {tool name}`` child with its own start and end. Attribute names are in
:mod:`.conventions`; ids come from :mod:`.ids`, so the same run always makes the same
spans. Content (prompts, assistant text, thinking, tool arguments and results) is
added only when :class:`TraceSettings` captures it; nothing else from a document is
read: the spans are built from named fields, so what is sealed or private in a
document (``sdkMetadata``, checkpoints) cannot reach them.

The spans are the SDK's own :class:`~opentelemetry.sdk.trace.ReadableSpan`, the type
every span exporter takes, built here rather than through a ``Tracer``: a tracer
draws random ids (a custom ``IdGenerator`` is asked for an id without being told for
which span, so it would need the next id slipped to it before each call), applies the
environment's sampler and span limits (``OTEL_TRACES_SAMPLER`` could drop a run), and
hands spans to a processor whose queue drops them when full. Built directly, a span
has exactly the ids, times and attributes chosen here, and goes where the exporter
is told, when it is told.

Times (epoch milliseconds in documents, hostile ones included) become nanoseconds
by :func:`time_ns`: the root starts at ``startedAt``, else ``createdAt``, and ends at
``endedAt``, else ``updatedAt``, taking the first that is a time between 1970 and the
end of int64 nanoseconds (2262) and, for the end, not before the start; without one,
the start is the end and the end the start (both 1970-01-01 when neither is). A tool
call spans its first event to the event that ended it, or to its last event.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import __version__
from ..backend.history import count
from ..viewer.transcript import Other, Text, ToolCall
from . import content
from . import conventions as c
from .ids import ROOT, span_id, trace_id
from .reading import RunRecord

#: The largest epoch milliseconds whose nanoseconds fit int64 (2262-04-11).
MAX_TIME_MS = (2**63 - 1) // 1_000_000
#: Tool calls sent as spans per run; the rest are counted on the root.
MAX_TOOL_SPANS = 1000
#: Run statuses that are a failure: the root's status is an error.
FAILED = frozenset({"error", "expired"})
DEFAULT_SERVICE_NAME = "bridge-store"
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_ERROR_CODE = re.compile(rf"\[({_CODE.pattern})\]")
_SCOPE = InstrumentationScope("bridge_store.run_traces", __version__, c.SCHEMA_URL)


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """What every trace shares: the service it names, and whether content goes too."""

    service_name: str = DEFAULT_SERVICE_NAME
    capture_content: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> TraceSettings:
        """``OTEL_SERVICE_NAME`` (else bridge-store) and the conventions' content switch."""
        environ = os.environ if environ is None else environ
        service = environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
        capture = environ.get(c.CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
        return cls(service, capture)


def time_ms(value: Any) -> int | None:
    """``value`` if it is a time spans can carry (epoch ms, 1970 to 2262), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TIME_MS:
        return value
    return None


def time_ns(*candidates: Any, not_before: int = 0) -> int | None:
    """The first candidate that is a time at or after ``not_before`` (ms), in ns."""
    for candidate in candidates:
        ms = time_ms(candidate)
        if ms is not None and ms >= not_before:
            return ms * 1_000_000
    return None


class SpanMaker:
    """Makes the spans of runs, one resource per tenant."""

    def __init__(self, settings: TraceSettings) -> None:
        self.settings = settings
        self._resources: dict[str, Resource] = {}

    def resource(self, tenant: str) -> Resource:
        resource = self._resources.get(tenant)
        if resource is None:
            # OTEL_RESOURCE_ATTRIBUTES adds to it; the service and tenant are ours.
            resource = self._resources[tenant] = Resource.create(
                {
                    c.SERVICE_NAME: self.settings.service_name,
                    c.SERVICE_VERSION: __version__,
                    c.TENANT: tenant,
                }
            )
        return resource

    def spans(self, record: RunRecord) -> list[ReadableSpan]:
        """The run's root span, then one span per tool call."""
        run, tenant = record.run, record.tenant
        agent_id, run_id = run["agentId"], run["runId"]
        trace = trace_id(tenant, agent_id, run_id)
        root = SpanContext(
            trace, span_id(tenant, agent_id, run_id, ROOT), False, TraceFlags(TraceFlags.SAMPLED)
        )
        start, end = _run_times(record)
        resource = self.resource(tenant)
        calls = [
            call
            for call in record.transcript.calls.values()
            if call.status != "requested"  # asked for by the model, never run
        ]
        attributes = self._root_attributes(record)
        if len(calls) > MAX_TOOL_SPANS:
            attributes[c.TOOL_CALLS_LEFT_OUT] = len(calls) - MAX_TOOL_SPANS
        agent_name = content.name((record.agent or {}).get("name"))
        spans = [
            ReadableSpan(
                name=f"{c.INVOKE_AGENT} {agent_name}" if agent_name else c.INVOKE_AGENT,
                context=root,
                resource=resource,
                attributes=attributes,
                kind=SpanKind.INTERNAL,
                status=_run_status(run),
                start_time=start,
                end_time=end,
                instrumentation_scope=_SCOPE,
            )
        ]
        for call in calls[:MAX_TOOL_SPANS]:
            context = SpanContext(
                trace,
                span_id(tenant, agent_id, run_id, "tool", call.call_id),
                False,
                TraceFlags(TraceFlags.SAMPLED),
            )
            spans.append(self._tool_span(record, call, root, context, resource, start, end))
        return spans

    def _root_attributes(self, record: RunRecord) -> dict[str, Any]:
        run, agent = record.run, record.agent or {}
        attributes: dict[str, Any] = {
            c.OPERATION_NAME: c.INVOKE_AGENT,
            c.PROVIDER_NAME: c.PROVIDER,
            c.AGENT_ID: content.clean(run["agentId"], content.NAME_CHARS),
            c.CONVERSATION_ID: content.clean(run["agentId"], content.NAME_CHARS),
            c.RUN_ID: content.clean(run["runId"], content.NAME_CHARS),
        }
        optional = {
            c.AGENT_NAME: content.name(agent.get("name")),
            c.WORKSPACE: content.name(agent.get("cwd")),
            c.REQUEST_MODEL: content.name(_model_id(run.get("model"))),
            c.RESPONSE_MODEL: content.name(_response_model(record)),
            c.RUN_STATUS: content.name(run.get("status")),
            c.RUN_CREATOR: content.name(record.creator),
        }
        attributes.update({key: value for key, value in optional.items() if value is not None})
        turn = count(run.get("turnNumber"))
        if turn is not None:
            attributes[c.RUN_TURN] = turn
        attributes.update(_usage(run.get("usage")))
        if run.get("status") in FAILED:
            attributes[c.ERROR_TYPE] = _error_type(run)
        if record.events_cut:
            attributes[c.EVENTS_CUT] = True
        if self.settings.capture_content:
            attributes.update(_messages(record))
        return attributes

    def _tool_span(
        self,
        record: RunRecord,
        call: ToolCall,
        parent: SpanContext,
        context: SpanContext,
        resource: Resource,
        run_start: int,
        run_end: int,
    ) -> ReadableSpan:
        transcript = record.transcript
        start = time_ns(transcript.began.get(call.key))
        if start is None:
            start = run_start
        end = time_ns(transcript.ended.get(call.key), not_before=start // 1_000_000)
        tool = content.clean(call.name, content.NAME_CHARS)
        attributes: dict[str, Any] = {
            c.OPERATION_NAME: c.EXECUTE_TOOL,
            c.TOOL_NAME: tool,
            c.TOOL_CALL_ID: content.clean(call.call_id, content.NAME_CHARS),
            c.TOOL_STATUS: content.clean(call.status, content.NAME_CHARS),
        }
        status = Status(StatusCode.UNSET)
        if call.status == "error":
            attributes[c.ERROR_TYPE] = c.TOOL_ERROR
            status = Status(StatusCode.ERROR)
        if self.settings.capture_content:
            if call.args is not None:
                attributes[c.TOOL_CALL_ARGUMENTS] = content.as_json(call.args)
            if call.result is not None:
                attributes[c.TOOL_CALL_RESULT] = content.as_json(call.result)
        return ReadableSpan(
            name=f"{c.EXECUTE_TOOL} {tool}",
            context=context,
            parent=parent,
            resource=resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=start,
            # A call that never ended (the run did first) ends with the run.
            end_time=end if end is not None else max(start, run_end),
            instrumentation_scope=_SCOPE,
        )


def _run_times(record: RunRecord) -> tuple[int, int]:
    run = record.run
    start = time_ns(run.get("startedAt"), run.get("createdAt"))
    end = time_ns(run.get("endedAt"), run.get("updatedAt"), not_before=(start or 0) // 1_000_000)
    if start is None:
        start = end if end is not None else 0
    return start, end if end is not None else start


def _model_id(model: Any) -> Any:
    return model.get("id") if isinstance(model, dict) else None


def _response_model(record: RunRecord) -> Any:
    """The model a ``system`` event names (the model that answered), if one does."""
    for block in record.transcript.blocks:
        if isinstance(block, Other) and block.label == "system" and isinstance(block.value, dict):
            model = block.value.get("model")
            return _model_id(model) if isinstance(model, dict) else model
    return None


def _usage(usage: Any) -> dict[str, int]:
    """The usage's counts under the conventions' names. The run's four kinds are
    disjoint (``totalTokens`` is their sum); the conventions' input tokens include the
    cached ones, so they are the input, cache read and cache write added up."""
    if not isinstance(usage, dict):
        return {}
    kinds = {kind: count(usage.get(kind)) for kind in _USAGE_KINDS}
    found = {kind: value for kind, value in kinds.items() if value is not None and value >= 0}
    counts: dict[str, int] = {}
    inputs = [
        found[k] for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens") if k in found
    ]
    if inputs:
        counts[c.INPUT_TOKENS] = sum(inputs)
    for kind, attribute in _USAGE_ATTRIBUTES.items():
        if kind in found:
            counts[attribute] = found[kind]
    return counts


_USAGE_ATTRIBUTES = {
    "outputTokens": c.OUTPUT_TOKENS,
    "cacheReadTokens": c.CACHE_READ_INPUT_TOKENS,
    "cacheWriteTokens": c.CACHE_CREATION_INPUT_TOKENS,
    "reasoningTokens": c.REASONING_OUTPUT_TOKENS,
}
_USAGE_KINDS = ("inputTokens", *_USAGE_ATTRIBUTES)


def _error_type(run: Any) -> str:
    """The code an error message opens with (``[permission_denied] HTTP 403``), else
    the run's status (``error``, ``expired``): few values, as the conventions ask."""
    error = run.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, str) and _CODE.fullmatch(code):
            return code
        error = error.get("message")
    if isinstance(error, str) and (match := _ERROR_CODE.match(error.strip())) is not None:
        return match.group(1)
    return str(run.get("status"))


def _run_status(run: Any) -> Status:
    if run.get("status") not in FAILED:
        return Status(StatusCode.UNSET)
    error = run.get("error")
    text = error if isinstance(error, str) else None
    if isinstance(error, dict):
        message = error.get("message")
        text = message if isinstance(message, str) else content.as_json(error)
    return Status(StatusCode.ERROR, content.clean(text, content.MESSAGE_CHARS) if text else None)


def _messages(record: RunRecord) -> dict[str, str]:
    texts = [block for block in record.transcript.blocks if isinstance(block, Text)]
    status = record.run.get("status")
    finish = "error" if status in FAILED else "stop"
    found = {
        c.INPUT_MESSAGES: content.input_messages([t for t in texts if t.kind == "user"]),
        c.OUTPUT_MESSAGES: content.output_messages(
            [t for t in texts if t.kind in ("assistant", "thinking")], finish
        ),
    }
    return {key: value for key, value in found.items() if value is not None}
