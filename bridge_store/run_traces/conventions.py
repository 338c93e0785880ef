"""Every attribute name and fixed value the run traces use, in one place.

The ``gen_ai.*`` names are the OpenTelemetry GenAI semantic conventions' (status
*development*), as of :data:`SEMCONV_VERSION`: the release the ``otel`` extra's pinned
``opentelemetry-semantic-conventions`` (0.66b1) was generated from, whose
``_incubating.attributes.gen_ai_attributes`` holds each of them
(``tests/test_run_traces.py`` checks every name against it). The GenAI conventions are
kept in their own repository (``open-telemetry/semantic-conventions-genai``) now; a
renamed attribute there is one edit here. ``error.type`` is the general conventions'.
What the conventions have no name for (the run's id, turn, status and creator, the
agent's workspace, the tenant) is ``bridge_store.*``.
"""

from __future__ import annotations

#: The semantic conventions release the names below are taken from.
SEMCONV_VERSION = "1.44.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# -- gen_ai.* (OpenTelemetry GenAI semantic conventions) -------------------------------
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
# Content: only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"

#: Every ``gen_ai.*`` name above, for the check against the installed conventions.
GEN_AI_NAMES = (
    *(OPERATION_NAME, PROVIDER_NAME, AGENT_ID, AGENT_NAME, CONVERSATION_ID),
    *(REQUEST_MODEL, RESPONSE_MODEL, INPUT_TOKENS, OUTPUT_TOKENS, CACHE_READ_INPUT_TOKENS),
    *(CACHE_CREATION_INPUT_TOKENS, REASONING_OUTPUT_TOKENS, TOOL_NAME, TOOL_CALL_ID),
    *(INPUT_MESSAGES, OUTPUT_MESSAGES, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT),
)

# -- values ---------------------------------------------------------------------------
INVOKE_AGENT = "invoke_agent"
EXECUTE_TOOL = "execute_tool"
#: ``gen_ai.provider.name``: the conventions list no value for Cursor, so its name.
PROVIDER = "cursor"
#: The environment switch the conventions give content capture.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# -- general conventions --------------------------------------------------------------
ERROR_TYPE = "error.type"
SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
#: ``error.type`` of a tool call whose events end it with status ``error``.
TOOL_ERROR = "tool_error"

# -- bridge_store.* (what the conventions name nothing for) ---------------------------
TENANT = "bridge_store.tenant"
RUN_ID = "bridge_store.run.id"
RUN_TURN = "bridge_store.run.turn_number"
RUN_STATUS = "bridge_store.run.status"
RUN_CREATOR = "bridge_store.run.creator"
WORKSPACE = "bridge_store.agent.workspace"
TOOL_STATUS = "bridge_store.tool_call.status"
#: Tool calls a run had past :data:`~.mapping.MAX_TOOL_SPANS`, not sent as spans.
TOOL_CALLS_LEFT_OUT = "bridge_store.run.tool_calls_left_out"
#: Set (true) when the run's events were read only up to :data:`~.reading.MAX_EVENTS`.
EVENTS_CUT = "bridge_store.run.events_cut"
