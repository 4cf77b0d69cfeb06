"""The gateway's endpoints in the API's OpenAPI document (/api/openapi.json, /api/docs),
under their own tag, with request and response schemas.

The gateway is not served by django-ninja (its views answer in OpenAI's and Anthropic's
own shapes: ``dashboard/gateway``); these schemas only describe it. Request schemas list the
fields each endpoint reads or forwards and refuse any other (as the endpoint does, with a
400 naming the field); ``tests/service/test_gateway_openapi.py`` checks them against the
endpoints' own lists. A new endpoint is one more entry of ``ENDPOINTS``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TAG = "Gateway"
TAG_DESCRIPTION = (
    "OpenAI- and Anthropic-compatible endpoints for agents: point an SDK's base URL at the service "
    "(`/v1`) with a project API key as its key. The gateway keeps the conversation as a session, compacts "
    "it with the project's policy before the model call, and forwards the live context to the operator's "
    "upstream. Errors are the SDK's own error objects, not `{\"detail\": ...}`.")

Number = float


class _Open(BaseModel):
    """An object whose other fields are the client's (kept as given)."""

    model_config = ConfigDict(extra="allow")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- OpenAI chat completions ----------------------------------------------------------------------

class FunctionCall(_Open):
    name: str
    arguments: str = Field(description="The arguments as JSON text.")


class ToolCall(_Open):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = Field(
        None, description="Text, or content parts (text, image_url); null for an assistant turn of tool calls only.")
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = Field(None, description="The call a tool message answers.")


class FunctionTool(_Open):
    type: Literal["function"]
    function: dict[str, Any] = Field(description="name, description and parameters (a JSON Schema).")


class StreamOptions(_Open):
    include_usage: bool | None = None


class ChatCompletionRequest(_Closed):
    """OpenAI's chat completion request. Fields that shape the answer are forwarded upstream
    as given; ``metadata``, ``stream_options``, ``n`` and ``store`` are read by the gateway."""

    model: str = Field(description="A model the operator's upstream serves (a name without a provider prefix goes "
                                   "to GATEWAY_API_BASE; a prefixed one to a model connection allowing it).")
    messages: list[ChatMessage] = Field(min_length=1, description="The whole conversation, as an agent resends it.")
    stream: bool | None = None
    stream_options: StreamOptions | None = Field(None, description="Only with stream: true.")
    tools: list[FunctionTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    n: Literal[1] | None = Field(None, description="Only 1 is served.")
    metadata: dict[str, str] | None = Field(None, description="metadata.session_id names the session.")
    store: bool | None = None
    user: str | None = Field(None, description="Names the session when no X-Session-Id or metadata.session_id does.")
    temperature: Number | None = None
    top_p: Number | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: Number | None = None
    frequency_penalty: Number | None = None
    logit_bias: dict[str, Number] | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None


class AnswerMessage(_Open):
    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ToolCall] | None = None
    refusal: str | None = None


class Choice(_Open):
    index: int
    message: AnswerMessage
    logprobs: dict[str, Any] | None = None
    finish_reason: str


class ChatUsage(_Open):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(_Open):
    """The answer (``stream: true``: ``chat.completion.chunk`` events, then ``data: [DONE]``)."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: ChatUsage


class OpenAIErrorDetail(_Open):
    message: str
    type: str | None = None
    param: str | None = None
    code: str | int | None = None


class OpenAIError(_Open):
    """Every refusal and upstream failure (the upstream's own error object when it sent one)."""

    error: OpenAIErrorDetail


# -- POST /v1/responses/compact ---------------------------------------------------------------------

class CompactRequest(_Closed):
    """OpenAI's standalone compaction request, done with the project's policy."""

    model: str
    input: str | list[dict[str, Any]] = Field(
        description="Responses items: messages, function_call, function_call_output, and compaction items this "
                    "endpoint returned earlier.")
    instructions: str | None = None
    previous_response_id: None = Field(None, description="Not served: send the conversation's items in input.")
    prompt_cache_key: Any = Field(None, description="Accepted and ignored (a setting of OpenAI's own servers).")
    prompt_cache_retention: Any = Field(None, description="Accepted and ignored.")
    prompt_cache_options: Any = Field(None, description="Accepted and ignored.")
    service_tier: Any = Field(None, description="Accepted and ignored.")


class ResponsesUsage(_Open):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class Compaction(_Open):
    """The live context after the compaction, as output items: the messages kept and one readable
    ``compaction`` item (the summary, with the archive handle of what it replaced)."""

    id: str
    object: Literal["response.compaction"]
    created_at: int
    output: list[dict[str, Any]]
    usage: ResponsesUsage


# -- POST /v1/responses -----------------------------------------------------------------------------

class FunctionToolDef(_Closed):
    """A function tool in the Responses form (hosted tools such as ``web_search`` are refused,
    whichever way the upstream is reached)."""

    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="A JSON Schema of the arguments.")
    strict: bool | None = None


class CompactionEntry(_Closed):
    type: Literal["compaction"]
    compact_threshold: int | None = Field(
        None, ge=1, description="Input tokens above which the conversation is compacted before this call.")


class ResponseCreateRequest(_Closed):
    """OpenAI's Responses request, answered through the operator's upstream in its
    chat-completions form. ``input`` may be left out when ``previous_response_id`` is given."""

    model: str = Field(description="A model the operator's upstream serves (as on chat completions).")
    input: str | list[dict[str, Any]] | None = Field(
        None, description="Text, or items: messages (input_text, output_text, input_image parts), function_call, "
                          "function_call_output, reasoning (kept with the assistant turn it precedes; sent again only "
                          "to an upstream that serves Responses, passed through), and compaction items "
                          "this gateway returned, which stand for the stored messages they replaced.")
    instructions: str | None = Field(None, description="Sent first, as the system message.")
    previous_response_id: str | None = Field(
        None, max_length=64, description="A response of this project: its history comes before this input.")
    stream: bool | None = None
    stream_options: dict[str, Any] | None = Field(None, description="include_obfuscation only, with stream: true.")
    tools: list[FunctionToolDef] | None = None
    tool_choice: str | dict[str, Any] | None = Field(
        None, description="none, auto, required, or {\"type\": \"function\", \"name\": ...} naming a given tool.")
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(None, ge=1, description="Forwarded as max_tokens.")
    temperature: Number | None = Field(None, ge=0, le=2)
    top_p: Number | None = Field(None, ge=0, le=1)
    text: dict[str, Any] | None = Field(None, description="text.format (text, json_object, json_schema), forwarded "
                                                          "as response_format; text.verbosity only to an upstream that "
                                                          "serves Responses (pass-through), else a 400.")
    reasoning: dict[str, Any] | None = Field(None, description="reasoning.effort, forwarded as reasoning_effort; "
                                                               "reasoning.summary only in pass-through, else a 400.")
    include: list[Literal["reasoning.encrypted_content", "message.output_text.logprobs",
                          "message.input_image.image_url"]] | None = Field(
        None, description="reasoning.encrypted_content accepted (no reasoning item is produced); the other two only "
                          "in pass-through, else a 400.")
    top_logprobs: int | None = Field(None, ge=0, le=20, description="Only in pass-through, else a 400.")
    metadata: dict[str, str] | None = Field(None, description="metadata.session_id names the session.")
    user: str | None = Field(None, description="Names the session when no X-Session-Id or metadata.session_id does.")
    store: bool | None = Field(None, description="Accepted: every conversation is kept as a session.")
    truncation: Literal["auto", "disabled"] | None = Field(
        None, description="Accepted: the gateway compacts instead of truncating.")
    context_management: list[CompactionEntry] | None = Field(
        None, description="A compaction entry: its compact_threshold is the policy's trigger for this request, and "
                          "the output starts with a readable compaction item when a compaction ran.")
    prompt_cache_key: Any = Field(None, description="Accepted and ignored (a setting of OpenAI's own servers).")
    prompt_cache_retention: Any = Field(None, description="Accepted and ignored.")
    prompt_cache_options: Any = Field(None, description="Accepted and ignored.")
    service_tier: Any = Field(None, description="Accepted and ignored.")


class OutputText(_Open):
    type: Literal["output_text"]
    text: str


class OutputMessage(_Open):
    type: Literal["message"]
    id: str
    role: Literal["assistant"]
    status: str
    content: list[OutputText]


class FunctionCallItem(_Open):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str = Field(description="The arguments as JSON text.")
    status: str


class CompactionItem(_Open):
    """What a compaction replaced, readable; sent back as input, it stands for those messages."""

    type: Literal["compaction"]
    id: str
    summary: str
    encrypted_content: str = Field(description="The summary again (what OpenAI's SDKs keep and send back).")
    archive: dict[str, Any] = Field(description="The session, the run, and the archive entries it replaced.")


class Response(_Open):
    """The ``response`` object (``stream: true``: its events, ending with ``response.completed``)."""

    id: str
    object: Literal["response"]
    created_at: int
    model: str
    status: Literal["completed", "incomplete", "in_progress", "failed"]
    output: list[Annotated[OutputMessage | FunctionCallItem | CompactionItem, Field(discriminator="type")]]
    error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    usage: ResponsesUsage | None


# -- Anthropic messages -------------------------------------------------------------------------------

class AnthropicMessage(_Open):
    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


class AnthropicMetadata(_Closed):
    user_id: str | None = Field(None, description="Names the session when no X-Session-Id does.")


class MessagesRequest(_Closed):
    """Anthropic's Messages request, answered through the operator's upstream."""

    model: str
    messages: list[AnthropicMessage] = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    system: str | list[dict[str, Any]] | None = None
    metadata: AnthropicMetadata | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    temperature: Number | None = Field(None, ge=0, le=1)
    top_p: Number | None = Field(None, ge=0, le=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    context_management: dict[str, Any] | None = Field(
        None, description="edits: clear_tool_uses_20250919 and compact_20260112, read as the policy of this request.")
    service_tier: Literal["auto", "standard_only"] | None = None


class AnthropicUsage(_Open):
    input_tokens: int
    output_tokens: int


class AnthropicAnswer(_Open):
    """The answer (``stream: true``: Anthropic's named events)."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    content: list[dict[str, Any]]
    model: str
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: AnthropicUsage


class AnthropicErrorDetail(_Open):
    type: str
    message: str


class AnthropicError(_Open):
    type: Literal["error"]
    error: AnthropicErrorDetail


# -- the document -------------------------------------------------------------------------------------

SESSION_HEADER = {"name": "X-Session-Id", "in": "header", "required": False, "schema": {"type": "string"},
                  "description": "Names the conversation's session (else metadata or user do, else its first messages)."}
ANSWER_HEADERS = {
    "X-Compaction-Session": {"description": "The session the request continued or started.", "schema": {"type": "string"}},
    "X-Context-Tokens": {"description": "Tokens of the context sent upstream.", "schema": {"type": "string"}},
    "X-Compaction-Run": {"description": "The compaction run before this call, when one ran.", "schema": {"type": "string"}},
}


@dataclass(frozen=True)
class Endpoint:
    path: str
    operation_id: str
    summary: str
    description: str
    request: type[BaseModel]
    answer: type[BaseModel]
    error: type[BaseModel]
    stream: str | None        # what a streamed answer is, when the endpoint streams
    security: list[dict[str, list[str]]]
    headers: tuple[dict[str, Any], ...] = (SESSION_HEADER,)


ENDPOINTS: list[Endpoint] = [
    Endpoint("/v1/chat/completions", "gateway_chat_completions", "Chat completion through the gateway",
             "OpenAI's chat completions: the new messages are stored, the policy runs, the live context is forwarded.",
             ChatCompletionRequest, ChatCompletion, OpenAIError,
             "`data:` events of `chat.completion.chunk` objects, then `data: [DONE]`",
             [{"BearerKey": []}]),
    Endpoint("/v1/responses", "gateway_responses_create", "Response through the gateway",
             "OpenAI's Responses API for any upstream: the input items (or a previous response's history and the new "
             "input) are stored, the policy runs (or the request's context_management threshold), and the live "
             "context goes upstream in chat-completions form, or as Responses input items to the upstream's own "
             "/responses when the operator declared that upstream as serving them (GATEWAY_RESPONSES_PASSTHROUGH).",
             ResponseCreateRequest, Response, OpenAIError,
             "named events: response.created, response.in_progress, response.output_item.added, "
             "response.output_text.delta, response.function_call_arguments.delta, response.output_item.done, "
             "response.completed; an error event when the upstream fails mid-stream",
             [{"BearerKey": []}]),
    Endpoint("/v1/responses/compact", "gateway_responses_compact", "Compact a conversation now",
             "OpenAI's standalone compaction: the items are stored and a forced run compacts the live context.",
             CompactRequest, Compaction, OpenAIError, None, [{"BearerKey": []}]),
    Endpoint("/v1/messages", "gateway_messages", "Anthropic message through the gateway",
             "Anthropic's Messages API, answered through the operator's upstream with the project's policy.",
             MessagesRequest, AnthropicAnswer, AnthropicError,
             "Anthropic's named events (message_start ... message_stop)",
             [{"HeaderKey": []}, {"BearerKey": []}],  # (HeaderKey's X-API-Key is Anthropic's x-api-key)
             (SESSION_HEADER, {"name": "anthropic-version", "in": "header", "required": True,
                               "schema": {"type": "string", "pattern": r"^20\d\d-[01]\d-[0-3]\d$"},
                               "description": "The API version the Anthropic SDK sends (e.g. 2023-06-01)."})),
]

_REF = "#/components/schemas/{model}"


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` to ``model``, its schema (and those it uses) added to ``components``."""
    schema = model.model_json_schema(ref_template=_REF)
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema
    return {"$ref": _REF.format(model=model.__name__)}


def _operation(endpoint: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {"application/json": {"schema": _schema(endpoint.answer, components)}}
    if endpoint.stream:
        answer["text/event-stream"] = {"schema": {"type": "string", "description": endpoint.stream}}
    error = {"application/json": {"schema": _schema(endpoint.error, components)}}
    return {
        "operationId": endpoint.operation_id, "summary": endpoint.summary, "description": endpoint.description,
        "tags": [TAG], "security": endpoint.security, "parameters": list(endpoint.headers),
        "requestBody": {"required": True,
                        "content": {"application/json": {"schema": _schema(endpoint.request, components)}}},
        "responses": {
            "200": {"description": "The answer" + (f"; with stream: true, {endpoint.stream}" if endpoint.stream else ""),
                    "headers": ANSWER_HEADERS, "content": answer},
            "400": {"description": "The body is refused; the error names the field.", "content": error},
            "401": {"description": "No valid project API key.", "content": error},
            "default": {"description": "Any other failure: the upstream's status and error object (429, 502, 504...) "
                                       "or the gateway's own.", "content": error},
        },
    }


def add_to(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (the API's OpenAPI document) with the gateway's endpoints, tag and schemas."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemes = components.setdefault("securitySchemes", {})
    schemes.setdefault("BearerKey", {"type": "http", "scheme": "bearer"})
    schemes.setdefault("HeaderKey", {"type": "apiKey", "in": "header", "name": "X-API-Key"})
    paths = document.setdefault("paths", {})
    for endpoint in ENDPOINTS:
        paths[endpoint.path] = {"post": _operation(endpoint, schemas)}
    tags = [t for t in document.get("tags", []) if t.get("name") != TAG]
    document["tags"] = [*tags, {"name": TAG, "description": TAG_DESCRIPTION}]
    return document
