"""The plan format (irVersion 1), stated once: every limit, pattern and key set, as typed dicts.

The runtime's decoder (akm_run.plan) builds its checks from these definitions, the compiler's
lowering builds these dicts, the checker imports the limits, and `akmc schema` takes its bounds
from here. docs/plan-format.md describes the same format in prose.
"""

# No `from __future__ import annotations` here: TypedDict reads `NotRequired` from the evaluated
# annotations to know which keys are optional, and the decoder takes its key sets from that.

import re
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict, Union

FORMAT = "akm-plan"
IR_VERSION: Final = 1

# -- limits -------------------------------------------------------------------------------------------

MAX_INT = 2**53 - 1  # the largest integer every JSON reader represents exactly
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_PLAN_BYTES = 4 * 1024 * 1024
MAX_EMBEDDED_BYTES = 1024 * 1024
MAX_DEPTH = 8
MAX_STEPS = 256
MAX_PARAMS = 64
MAX_OUTPUTS = 64
MAX_CONCURRENCY = 64
MAX_TIMEOUT_MS = 24 * 3600 * 1000  # every duration in a plan (timeouts, backoff) lies in [1, this]
MIN_DURATION_MS = 1
MAX_RETRY = 10
MAX_LOOPS = 10
RetryReason = Literal["exit", "timeout", "spawn_error", "output_invalid"]
RETRY_REASONS: tuple[RetryReason, ...] = ("exit", "timeout", "spawn_error", "output_invalid")
OnError = Literal["fail", "continue"]
ON_ERROR: tuple[OnError, ...] = ("fail", "continue")

# -- patterns (matched in full) -------------------------------------------------------------------------

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"  # params, outputs, env variables, secrets, bindings
STEP_ID_PATTERN = r"[A-Za-z_][A-Za-z0-9_-]*"
PATH_SEGMENTS = rf"(?:\.{NAME_PATTERN}|\[[0-9]+\])*"  # `.name` and `[n]` into a value
NAME = re.compile(NAME_PATTERN)
STEP_ID = re.compile(STEP_ID_PATTERN)
SEGMENT = re.compile(rf"\.({NAME_PATTERN})|\[([0-9]+)\]")
REF = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*")
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
# The current element of a `map` step, in the bindings of its child-workflow target only.
ITEM_REFERENCE = re.compile(rf"item{PATH_SEGMENTS}")
REFERENCE = re.compile(rf"params\.(?P<param>{NAME_PATTERN})|steps\.(?P<step>{STEP_ID_PATTERN})\.output{PATH_SEGMENTS}")

# -- the shape -------------------------------------------------------------------------------------------

Schema: TypeAlias = dict[str, Any]  # a JSON Schema (draft 2020-12), checked by akm_run.schemas


class ShellTarget(TypedDict):
    kind: Literal["shell"]
    command: str


class ScriptTarget(TypedDict):
    kind: Literal["script"]
    path: str
    sha256: str
    text: str


class AgentTarget(TypedDict):
    kind: Literal["agent"]
    instructions: str
    path: NotRequired[str]


class ApprovalTarget(TypedDict):
    kind: Literal["approval"]
    message: str


class LiteralBinding(TypedDict):
    name: str
    kind: Literal["literal"]
    value: Any


ReferenceBinding = TypedDict("ReferenceBinding", {"name": str, "kind": Literal["reference"], "from": str})
ItemBinding = TypedDict("ItemBinding", {"name": str, "kind": Literal["item"], "from": str})
Binding: TypeAlias = Union[LiteralBinding, ReferenceBinding, ItemBinding]


class ChildTarget(TypedDict):
    kind: Literal["child-workflow"]
    ref: str
    planHash: str
    plan: "Plan"
    bindings: NotRequired[list[Binding]]


Target: TypeAlias = Union[ShellTarget, ScriptTarget, AgentTarget, ApprovalTarget, ChildTarget]
CheckTarget: TypeAlias = Union[ShellTarget, ScriptTarget]


class Gate(TypedDict):
    check: CheckTarget
    maxLoops: int


class Retry(TypedDict):
    max: int
    on: list[RetryReason]
    backoffMs: NotRequired[int]


class EnvLiteral(TypedDict):
    name: str
    kind: Literal["literal"]
    value: str


class EnvSecret(TypedDict):
    name: str
    kind: Literal["secret"]
    secret: str


class EnvPassthrough(TypedDict):
    name: str
    kind: Literal["passthrough"]


EnvEntry: TypeAlias = Union[EnvLiteral, EnvSecret, EnvPassthrough]


class _Step(TypedDict):
    """What every step has."""

    stepId: str
    index: int
    onError: OnError
    inputs: NotRequired[list[str]]
    outputSchema: NotRequired[Schema]


class _Work(_Step):
    """What a step that runs units has (a unit or a map step)."""

    target: Target
    gate: NotRequired[Gate]
    retry: NotRequired[Retry]
    timeoutMs: NotRequired[int]
    env: NotRequired[list[EnvEntry]]


class UnitStep(_Work):
    kind: Literal["unit"]


class MapStep(_Work):
    kind: Literal["map"]
    over: str
    concurrency: int


class Case(TypedDict):
    match: Any
    next: str


class RouteStep(_Step):
    kind: Literal["route"]
    input: str
    cases: list[Case]
    default: NotRequired[str]


Step: TypeAlias = Union[UnitStep, MapStep, RouteStep]
WorkStep: TypeAlias = Union[UnitStep, MapStep]


class Param(TypedDict):
    schema: Schema
    default: NotRequired[Any]
    description: NotRequired[str]


Output = TypedDict("Output", {"from": str, "schema": NotRequired[Schema]})


class Limits(TypedDict):
    concurrency: int
    maxUnits: NotRequired[int]
    timeoutMs: NotRequired[int]


class ReadEntry(TypedDict):
    """A file the plan was compiled from: `.akm` sources by path only, scripts and prompts with their hash."""

    path: str
    sha256: NotRequired[str]


class Plan(TypedDict):
    irVersion: Literal[1]
    ref: str
    title: str
    sourceReadSet: list[ReadEntry]
    limits: Limits
    steps: list[Step]
    description: NotRequired[str]
    params: NotRequired[dict[str, Param]]
    outputs: NotRequired[dict[str, Output]]


class PlanFile(TypedDict):
    format: Literal["akm-plan"]
    planHash: str
    plan: Plan


# Optional keys that carry user data and so may hold an empty value (a param default may well be
# `[]`); every other optional key is absent rather than empty.
VALUE_KEYS = frozenset({"default", "match"})


def keys(shape: Any) -> tuple[frozenset[str], frozenset[str]]:
    """(required, optional) keys of one of the typed dicts above."""
    return frozenset(shape.__required_keys__), frozenset(shape.__optional_keys__)


class PlanError(Exception):
    """A plan was refused. `str()` names the JSON path of the first failure."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def json_schema_pattern(pattern: re.Pattern[str]) -> str:
    """One of the patterns above as a JSON Schema `pattern` (ECMA-262, not anchored by default):
    anchored, its named groups plain."""
    return "^(?:" + re.sub(r"\(\?P<[A-Za-z_]+>", "(", pattern.pattern) + ")$"
