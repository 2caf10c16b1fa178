"""The provider-neutral participant vocabulary: operations, the conversation, decisions.

Every participant -- a hosted model behind a provider adapter or a local ``python``
agent -- receives a `DecisionRequest` and returns one `Decision` holding one `Operation`.
The conversation is neutral: adapters map it to each provider's wire format and back.
Images travel as digest references (`ImagePart.digest`) into `DecisionRequest.images`,
so an actor can ship the bytes as raw ZMQ frames instead of inside msgpack.

Interfaces: a series offers one tool set (``INTERFACES``). ``code`` is the coding agent's
(files, exec, observe, wait); ``actions`` drives the robot directly with action chunks
(``act``), no exec. A direct-action tool is an ``ActionOperation``: its ``chunk()`` is the list
of action vectors the trial executes through the simulator, one native control step each,
exactly as a script's steps (roboswe/evaluation/actions.py). Another family offers its own
action tools by subclassing ActionOperation with its tag and fields (``chunk()`` maps them to
action rows), adding the class to ``_OPERATION_TYPES`` (``OPERATIONS``, ``AnyOperation`` and
``OperationName`` derive from it), and naming a tool set in ``INTERFACES``; execution, records
and replay need nothing more.

A family whose environment action spans many control steps sets ``one_action = True`` on its
operation: the whole chunk is then ONE simulator ``Step`` (the scene runs it over as many control
steps as it takes), never cut by the decisions track's prefix K, and a chunk the scene rejects is
still an action it took (replayed, so the scene's own action log agrees). RoboPaint's ``paint``
tool set is the example: ``move_flange`` (one MoveFlange of 1-32 timed waypoints, a chunk of
8-vectors ``[x, y, z, qx, qy, qz, qw, duration_s]``) and ``submit_painting`` (a ``Finish``: the
paint scene saves and submits the canvas when the trial ends by it).

What a participant sends is its own: `parse_operation` refuses, as an InvalidOperation (the trial
answers it with an error result that costs no control steps), arguments nested deeper than
MAX_ARGUMENT_DEPTH (checked on the text before decoding), text holding a lone surrogate (no wire
or record can carry it), and anything over the maxima below, which the tool schemas state
(``maxItems``, ``maxLength``, ``maximum``) so a model sees them before it answers.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from typing import Annotated, Any, ClassVar, Literal, Union

import msgspec

# --------------------------------------------------------------------------- maxima
# What a participant may ask for in one operation, checked before any work (parse_operation) and
# stated in the tool schemas (maxItems, maxLength, maximum). Each is far above any legitimate use.

MAX_ARGUMENT_DEPTH = 32  # nesting of a tool call's arguments; the operations need at most 4 (move_flange)
MAX_ACT_ROWS = 1000  # rows of one act chunk: the largest horizon-track cap (configs/contracts horizon_cap_max); decisions K <= 5
MAX_ACTION_DIM = 64  # numbers in one action row: the families use 7 (panda), 8 (paint), 29 (gr1)
MAX_WAYPOINTS = 256  # a hard cap above the paint scene's own 32 (sim/paint/control.py), so 33..256 reach its rule
MAX_WAIT_STEPS = 100_000  # control steps of one wait: above every task's trial budget (door 6000); the trial bounds it by the steps left
MAX_WRITE_BYTES = 4 * 1024 * 1024  # a written file's size (the workspace's limit, in UTF-8 bytes; the schema states it in characters)
MAX_PATH_CHARS = 1024  # a workspace path (the workspace's limit, sandbox/walk.py MAX_PATH_BYTES, in UTF-8 bytes)
MAX_CAMERAS = 32  # camera names in one observe
MAX_NAME_CHARS = 256  # one camera name
MAX_NOTE_CHARS = 4096  # a finish reason or a search query: one sentence or phrase

# --------------------------------------------------------------------------- operations


class Operation(msgspec.Struct, frozen=True, kw_only=True, tag_field="op"):
    """One thing the participant asks the harness to do; the tag is the tool name."""


class WriteFile(Operation, tag="write_file"):
    """Create or replace a UTF-8 text file in the workspace."""

    path: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PATH_CHARS,
                                      description="Workspace-relative path, e.g. 'lift.py'.")]
    content: Annotated[str, msgspec.Meta(max_length=MAX_WRITE_BYTES, description=(
        f"The complete new file content (UTF-8, at most {MAX_WRITE_BYTES} bytes)."))]


class ReadFile(Operation, tag="read_file"):
    """Read a text file from the workspace."""

    path: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PATH_CHARS, description="Workspace-relative path.")]


class ListFiles(Operation, tag="list_files"):
    """List the workspace files with sizes."""


class Exec(Operation, tag="exec"):
    """Run a workspace Python script in the sandbox; it drives the robot through `import robot`."""

    path: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PATH_CHARS,
                                      description="Workspace-relative path of the script to run.")]


class Observe(Operation, tag="observe"):
    """Render camera images and read robot sensors; physics does not advance."""

    cameras: Annotated[
        Annotated[list[Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]], msgspec.Meta(max_length=MAX_CAMERAS)] | None,
        msgspec.Meta(description="Camera names to render; omit for the task's default cameras."),
    ] = None
    depth: Annotated[bool, msgspec.Meta(description="Also return depth images where the task allows.")] = False


class Wait(Operation, tag="wait"):
    """Advance physics holding the current targets; counts against the control-step budget."""

    steps: Annotated[int, msgspec.Meta(ge=1, le=MAX_WAIT_STEPS, description="Number of control steps to advance.")]


class ActionOperation(Operation):
    """A direct-action tool: the trial executes ``chunk()`` through the simulator (no sandbox)."""

    # False: one native control step per action row (act). True: the chunk is ONE environment
    # action sent whole in one simulator Step, spanning many control steps (move_flange).
    one_action: ClassVar[bool] = False

    def chunk(self) -> list[list[float]]:
        raise NotImplementedError


class Act(ActionOperation, tag="act"):
    """Execute an action chunk on the robot: one control step per action, in order; stops early at success or at the budget. The result is the observation after it."""

    actions: Annotated[
        list[Annotated[list[float], msgspec.Meta(max_length=MAX_ACTION_DIM)]],
        msgspec.Meta(min_length=1, max_length=MAX_ACT_ROWS,
                     description="1..K action vectors (each action_dim numbers, within the action bounds)."),
    ]

    def chunk(self) -> list[list[float]]:
        return self.actions


class FlangeWaypoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One timed MoveFlange waypoint (robot-base frame)."""

    position: Annotated[list[float], msgspec.Meta(
        min_length=3, max_length=3, description="Flange position [x, y, z] in robot-base metres (x right, y forward, z up).")]
    quaternion_xyzw: Annotated[list[float], msgspec.Meta(
        min_length=4, max_length=4, description="Flange orientation as a unit quaternion [x, y, z, w].")]
    duration_s: Annotated[float, msgspec.Meta(
        description="Seconds to move from the previous target to this waypoint (at least 0.08).")]


class MoveFlange(ActionOperation, tag="move_flange"):
    """One environment action: move the robot flange through 1-32 timed waypoints (batch total at most 20 s), executed by the task's own controller. An invalid batch is rejected whole, naming the waypoint and the rule (never clipped), and still counts as an action. The result is the scene's report and the observation after it."""

    one_action: ClassVar[bool] = True

    waypoints: Annotated[list[FlangeWaypoint], msgspec.Meta(
        min_length=1, max_length=MAX_WAYPOINTS, description="1 to 32 waypoints, in order; the limits are in your instructions.")]

    def chunk(self) -> list[list[float]]:
        return [[*w.position, *w.quaternion_xyzw, w.duration_s] for w in self.waypoints]


class SearchHistory(Operation, tag="search_history"):
    """Literal search over conversation turns removed from the active context."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NOTE_CHARS,
                                       description="Exact text to look for (case-insensitive).")]


class Finish(Operation, tag="finish"):
    """End the current trial."""

    reason: Annotated[str, msgspec.Meta(max_length=MAX_NOTE_CHARS, description="Why the trial is finished, in one sentence.")] = ""


class FinishTrial(Operation, tag="finish_trial"):
    """RLE-Bench speed-run evaluation: end the current trial in this kitchen as it stands (no further action counts for it)."""


class NextTrial(Operation, tag="next_trial"):
    """RLE-Bench speed-run evaluation: open the next trial, in a kitchen you have not seen (the current one must be finished)."""


class SubmitPainting(Finish, tag="submit_painting"):
    """Submit the painting: the canvas is saved as it is now and the round (this trial) ends."""

    reason: Annotated[str, msgspec.Meta(max_length=MAX_NOTE_CHARS,
                                        description="Optional: a note on the painting, in one sentence.")] = ""


_OPERATION_TYPES = (WriteFile, ReadFile, ListFiles, Exec, Observe, Wait, Act, MoveFlange, SearchHistory, FinishTrial,
                    NextTrial, Finish, SubmitPainting)
# The one list of operations, in the order tools are offered; the union, the names and the table derive from it.

OPERATIONS: dict[str, type[Operation]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in _OPERATION_TYPES
}
"""Tool name -> operation Struct, in the order tools are offered."""

AnyOperation = Union[_OPERATION_TYPES]  # type: ignore[valid-type]  # noqa: UP007 - built from the tuple
"""Any operation Struct (decoded by its ``op`` tag)."""

OperationName = Literal[tuple(OPERATIONS)]  # type: ignore[valid-type]
"""The tool names, one per operation (each operation Struct's tag)."""

Role = Literal["user", "assistant"]

SEARCH_HISTORY = "search_history"

ACTION_OPERATIONS: frozenset[str] = frozenset(n for n, c in OPERATIONS.items() if issubclass(c, ActionOperation))
"""The direct-action tool names (executed through the simulator, replayed from their chunk)."""

INTERFACES: dict[str, tuple[str, ...]] = {
    # The coding agent: scripts drive the robot through `import robot` in the sandbox.
    "code": ("write_file", "read_file", "list_files", "exec", "observe", "wait", "search_history", "finish"),
    # A policy (or a model acting directly): action chunks; workspace files stay available as notes.
    "actions": ("act", "observe", "write_file", "read_file", "list_files", "search_history", "finish"),
    # RoboPaint acting directly: MoveFlange batches, notes in the workspace, submit.
    "paint": ("move_flange", "observe", "write_file", "read_file", "list_files", "search_history", "submit_painting"),
    # An RLE-Bench speed-run's evaluation phase: the coding agent's tools in hidden kitchens, one trial each, moved
    # through by finish_trial and next_trial (no wait: every action is the participant's, from its scripts).
    "evaluation": ("write_file", "read_file", "list_files", "exec", "observe", "search_history", "finish_trial",
                   "next_trial", "finish"),
}
"""Interface name -> the tool names it offers (in OPERATIONS order when offered)."""

Interface = Literal[tuple(INTERFACES)]  # type: ignore[valid-type]
"""An interface's name (a key of ``INTERFACES``)."""


def operation_name(op: Operation) -> str:
    """The tool name of an operation (its tag)."""
    return type(op).__struct_config__.tag  # type: ignore[return-value]


def _strip_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    # Optional fields become plain optional properties: several providers (Gemini) reject
    # `anyOf [..., null]`, and an omitted argument means the same thing as null here.
    out: dict[str, Any] = {}
    for key, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        any_of = prop.pop("anyOf", None)
        if any_of is not None:
            non_null = [s for s in any_of if s.get("type") != "null"]
            if len(non_null) == 1:
                prop = {**non_null[0], **prop}
            else:
                prop["anyOf"] = any_of
        if prop.get("default", 0) is None:
            prop.pop("default")
        out[key] = prop
    return out


def _object_schema(body: dict[str, Any], defs: dict[str, Any], drop: str | None = None) -> dict[str, Any]:
    props = {k: _inline(v, defs) for k, v in _strip_nullable(body).items() if k != drop}
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "required": [r for r in body.get("required", []) if r != drop], "additionalProperties": False}
    if body.get("description"):
        out["description"] = body["description"]
    return out


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    # Nested Structs (a MoveFlange waypoint) come as "$ref"s into msgspec's "$defs"; a tool's
    # parameters travel alone, so each is inlined as a closed object (no $ref for a provider to resolve).
    if isinstance(schema, list):
        return [_inline(s, defs) for s in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**_object_schema(defs[ref.removeprefix("#/$defs/")], defs),
                **{k: v for k, v in schema.items() if k != "$ref"}}
    return {k: _inline(v, defs) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}


def tool_parameters(cls: type[Operation]) -> dict[str, Any]:
    """The JSON schema of an operation's arguments (the object a tool call carries), self-contained."""
    (component,), defs = msgspec.json.schema_components([cls])
    out = _object_schema(defs[cls.__name__], defs, drop=cls.__struct_config__.tag_field)
    out.pop("description", None)  # the tool's own description says it
    return out


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered to the participant: name, one-line description, argument schema."""

    name: str
    description: str
    parameters: dict[str, Any]


def tool_spec(name: str) -> ToolSpec:
    """The ToolSpec of one operation by its tool name; raises KeyError for unknown names."""
    cls = OPERATIONS[name]
    return ToolSpec(name=name, description=(cls.__doc__ or name).strip(), parameters=tool_parameters(cls))


def offered_tools(*, search_history: bool, interface: str = "code") -> list[ToolSpec]:
    """The interface's tools offered in a request; search_history only after the first context slide."""
    names = INTERFACES[interface]
    return [tool_spec(n) for n in OPERATIONS if n in names and (n != SEARCH_HISTORY or search_history)]


class InvalidOperation(ValueError):
    """A tool call that does not name a known operation or has bad arguments."""


_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_MAX_PROBLEM_CHARS = 1000  # an InvalidOperation message enters the conversation: keep it short


def json_depth(text: str) -> int:
    """How deeply the JSON text nests arrays and objects (``{"a": [1]}`` is 2), found without decoding
    it; brackets inside strings do not count. Unbalanced text counts its open brackets."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def _problem(text: str) -> InvalidOperation:
    if len(text) > _MAX_PROBLEM_CHARS:
        text = text[:_MAX_PROBLEM_CHARS] + " [...]"
    return InvalidOperation(clean_text(text))


def _check_values(name: str, arguments: dict[str, Any]) -> None:
    """Raise InvalidOperation for arguments nested deeper than MAX_ARGUMENT_DEPTH or holding text that
    is not valid Unicode (a lone surrogate: no wire or record could carry it). Iterative: no recursion."""
    stack: list[tuple[Any, int, str]] = [(arguments, 1, "$")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            at = where if len(where) <= 60 else where[:60] + "..."
            raise _problem(f"arguments of {name} are nested deeper than {MAX_ARGUMENT_DEPTH} levels (at {at}); "
                           "an operation's arguments need at most 4")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
                raise _problem(f"arguments of {name}: a key in {where[:80]} holds a lone surrogate "
                                     f"({clean_text(key)[:40]!r}); send valid Unicode text")
            if isinstance(item, str):
                if not item.isascii() and (bad := _SURROGATE.search(item)):
                    at = f"{where}.{key}" if isinstance(value, dict) else f"{where}[{key}]"
                    raise _problem(f"arguments of {name}: {at[:80]} holds a lone surrogate "
                                         f"({bad.group()!a} at character {bad.start()}), which is not valid Unicode "
                                         f"text and cannot be written or sent; encode the text as valid UTF-8 "
                                         f"(a character outside the BMP is one code point, not half a surrogate pair)")
            elif isinstance(item, (dict, list)):
                at = f"{where}.{key}" if isinstance(value, dict) else f"{where}[{key}]"
                stack.append((item, depth + 1, at if len(at) < 200 else at[:200]))


def parse_operation(name: str, arguments: str | bytes | dict[str, Any]) -> Operation:
    """Decode a tool call into an Operation; raises InvalidOperation saying what was wrong.

    Nothing the participant sends raises anything else: JSON text is checked for its nesting depth
    before it is decoded (MAX_ARGUMENT_DEPTH), decoded values for depth and lone surrogates, and
    the operation's own maxima (MAX_ACT_ROWS, MAX_WAYPOINTS, ...) by its type."""
    cls = OPERATIONS.get(name)
    if cls is None:
        raise _problem(f"unknown operation {name[:64]!r}; expected one of {', '.join(OPERATIONS)}")
    if isinstance(arguments, bytes):
        try:
            arguments = arguments.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _problem(f"arguments of {name} are not UTF-8 text: {e}") from None
    if isinstance(arguments, str):
        if json_depth(arguments) > MAX_ARGUMENT_DEPTH:
            raise _problem(f"arguments of {name} are nested deeper than {MAX_ARGUMENT_DEPTH} levels; "
                           "an operation's arguments need at most 4")
        try:
            arguments = json.loads(arguments or "{}")
        except (ValueError, RecursionError) as e:
            raise _problem(f"arguments of {name} are not valid JSON: {e}") from None
    if not isinstance(arguments, dict):
        raise _problem(f"arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    _check_values(name, arguments)
    try:
        return msgspec.convert(arguments, cls, strict=False)
    except msgspec.ValidationError as e:
        raise _problem(f"bad arguments for {name}: {e}") from None
    except RecursionError:  # not reached after the depth check; kept so no input can escape as one
        raise _problem(f"arguments of {name} are nested too deeply to read") from None


# --------------------------------------------------------------------------- conversation


class Part(msgspec.Struct, frozen=True, kw_only=True, tag_field="part"):
    """One piece of a conversation turn."""


class TextPart(Part, tag="text"):
    text: str


class ImagePart(Part, tag="image"):
    """A camera image, or a task's goal image (``camera``: its name, e.g. "goal"); the bytes live in `DecisionRequest.images[digest]`."""

    digest: str  # sha256 hex of the encoded image bytes
    camera: str
    media_type: str = "image/png"
    width: int = 0
    height: int = 0


class ToolCallPart(Part, tag="tool_call"):
    """A tool call as the model made it: raw arguments kept verbatim, operation if they parsed."""

    call_id: str
    name: str
    arguments: str  # exact JSON text the model produced
    operation: AnyOperation | None = None


class ToolResultPart(Part, tag="tool_result"):
    """The harness's answer to one tool call."""

    call_id: str
    text: str
    images: list[ImagePart] = msgspec.field(default_factory=list)
    is_error: bool = False


class ReasoningPart(Part, tag="reasoning"):
    """Readable reasoning the provider chose to expose (e.g. a thinking summary); never sent back."""

    text: str


class OpaquePart(Part, tag="opaque"):
    """A provider item kept byte-exact for replay to that provider (thinking signatures,
    encrypted reasoning); never shown as readable reasoning."""

    provider: str
    kind: str  # e.g. "thinking", "redacted_thinking", "reasoning", "thought_signature"
    data: bytes  # exact JSON of the provider item


AnyPart = TextPart | ImagePart | ToolCallPart | ToolResultPart | ReasoningPart | OpaquePart


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One conversation turn. Assistant turns carry the provider's exact output in `native`
    (sent back verbatim to the same provider); the parts are the neutral reading of it."""

    id: str
    role: Role
    parts: list[AnyPart]
    trial: int = 0
    pinned: bool = False  # never removed by a context slide
    provider: str = ""  # adapter kind that produced this assistant turn
    native: bytes = b""  # exact provider output JSON for this turn (assistant turns)

    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    def text(self) -> str:
        """Searchable text of the turn: text, tool arguments and results (not opaque items)."""
        out = []
        for p in self.parts:
            match p:
                case TextPart(text=t) | ReasoningPart(text=t):
                    out.append(t)
                case ToolCallPart(name=n, arguments=a):
                    out.append(f"{n}({a})")
                case ToolResultPart(text=t):
                    out.append(t)
                case ImagePart(camera=c):
                    out.append(f"[image {c}]")
        return "\n".join(out)


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (not encodable as UTF-8) replaced by U+FFFD; the same object when it has none."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def _clean_struct(value: Any) -> Any:
    fixes: dict[str, Any] = {}
    for name in value.__struct_fields__:
        field = getattr(value, name)
        if isinstance(field, str):
            cleaned: Any = clean_text(field)
        elif isinstance(field, list) and field and isinstance(field[0], Part):
            cleaned = [_clean_struct(x) for x in field]
            if all(x is y for x, y in zip(cleaned, field)):
                continue
        else:
            continue
        if cleaned is not field:
            fixes[name] = cleaned
    return msgspec.structs.replace(value, **fixes) if fixes else value


def clean_turn(turn: Turn) -> Turn:
    """``turn`` with lone surrogates replaced by U+FFFD in every text field of its parts (a model's text,
    reasoning, tool-call arguments), so it encodes onto every wire and record; ``native`` stays the
    provider's exact bytes. The same object when nothing needed it."""
    return _clean_struct(turn)


def image_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def image_part(data: bytes, camera: str, media_type: str = "image/png") -> ImagePart:
    """An ImagePart for encoded image bytes (digest and PNG size filled in)."""
    width, height = png_size(data)
    return ImagePart(digest=image_digest(data), camera=camera, media_type=media_type, width=width, height=height)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG header; (0, 0) when the bytes are not a PNG."""
    if len(data) >= 24 and data[:8] == b"\x89PNG\r\n\x1a\n":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return 0, 0


# --------------------------------------------------------------------------- requests and decisions


class DecisionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a participant sees for one decision."""

    system: str
    tools: list[ToolSpec]
    conversation: list[Turn]
    images: dict[str, bytes] = msgspec.field(default_factory=dict)  # digest -> encoded bytes
    trial: int = 0
    series: str = ""

    def referenced_images(self) -> list[str]:
        """Digests of every image referenced by the conversation, in order, deduplicated."""
        seen: dict[str, None] = {}
        for turn in self.conversation:
            for p in turn.parts:
                if isinstance(p, ImagePart):
                    seen.setdefault(p.digest)
                elif isinstance(p, ToolResultPart):
                    for im in p.images:
                        seen.setdefault(im.digest)
        return list(seen)


def split_images(request: DecisionRequest) -> tuple[DecisionRequest, list[str], list[bytes]]:
    """For the wire: the request without image bytes, the digests, and the bytes as blobs."""
    digests = list(request.images)
    return msgspec.structs.replace(request, images={}), digests, [request.images[d] for d in digests]


def join_images(request: DecisionRequest, digests: list[str], blobs: Any) -> DecisionRequest:
    """Inverse of split_images; raises ValueError when digests and blobs disagree."""
    if len(digests) != len(blobs):
        raise ValueError(f"{len(digests)} image digest(s) but {len(blobs)} blob frame(s)")
    return msgspec.structs.replace(request, images={d: bytes(b) for d, b in zip(digests, blobs)})


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token usage as the provider reported it (zeros when not reported)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP attempt at a provider call, with its exact bytes (no credentials)."""

    number: int
    started_at: float  # wall clock (time.time())
    latency_s: float
    outcome: str  # "ok", "http_429", "http_500", "transport", "timeout", "malformed", "refused", ...
    status: int = 0
    detail: str = ""
    url: str = ""
    request: bytes = b""
    response: bytes = b""
    request_sha256: str = ""
    response_sha256: str = ""
    backoff_s: float = 0.0  # sleep after this attempt before the next one


class TokenCount(msgspec.Struct, frozen=True, kw_only=True):
    """Input units of one request and how they were counted.

    `exact` counts come from a provider's count endpoint; estimates are stored apart from
    them. `proxy` marks an OpenRouter base count N for the proxy ceil(m*N) + 8192.
    """

    tokens: int
    method: str  # e.g. "anthropic.count_tokens", "google.count_tokens", "openai.local_estimate"
    exact: bool
    proxy: bool = False
    attempts: list[Attempt] = msgspec.field(default_factory=list)


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A participant's answer: one operation (or why none could be read) and its evidence.

    `operation` is None when the model made no usable tool call; `invalid` then says why,
    and the series loop answers with an error result that consumes no control steps.
    """

    turn: Turn  # the assistant turn to append to the conversation
    operation: AnyOperation | None
    call_id: str = ""  # the tool call that carries `operation` (answer it with ToolResultPart)
    invalid: str = ""
    usage: Usage = msgspec.field(default_factory=Usage)
    attempts: list[Attempt] = msgspec.field(default_factory=list)
    latency_s: float = 0.0  # the successful attempt's latency
    model: str = ""  # model id the provider reported
    stop_reason: str = ""  # the provider's stop/finish reason, as reported

    @property
    def attempt_count(self) -> int:
        return len(self.attempts)


def result_turn(
    decision: Decision,
    *,
    id: str,
    text: str,
    images: list[ImagePart] = (),  # type: ignore[assignment]
    is_error: bool = False,
    trial: int = 0,
    extra_text: str = "",
) -> Turn:
    """The user turn answering a decision: its call's result, plus 'not executed' results
    for any further calls (one operation per decision), plus optional text."""
    parts: list[Any] = []
    for call in decision.turn.tool_calls():
        if call.call_id == decision.call_id:
            parts.append(ToolResultPart(call_id=call.call_id, text=text, images=list(images), is_error=is_error))
        else:
            parts.append(
                ToolResultPart(
                    call_id=call.call_id,
                    text="Not executed: one operation per decision; only the first tool call ran.",
                    is_error=True,
                )
            )
    if not parts or extra_text:
        parts.append(TextPart(text=(text if not parts else "") + extra_text))
    return Turn(id=id, role="user", parts=parts, trial=trial)


class ProviderFailure(Exception):
    """A provider call that failed after its last attempt; the trial becomes incomplete
    (reason "provider"). `attempts` holds every attempt's evidence."""

    reason = "provider"

    def __init__(self, detail: str, attempts: list[Attempt]):
        super().__init__(detail)
        self.detail = detail
        self.attempts = attempts
