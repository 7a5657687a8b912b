"""The plan format (irVersion 1), stated once: every key, limit and pattern, as typed dicts.

This is the only place a plan field is written. Each field's type carries its bounds and pattern
as `Annotated` metadata (`Range`, `Pattern`, `Items`, `SortedBy`, `Entries`); akm_run.planshape
reads these definitions into one description that both the runtime's strict decoder
(akm_run.plan) and the published JSON Schema (`akmc schema`, akmc.planschema) are built from. The
compiler's lowering builds these dicts and the checker imports the limits. docs/plan-format.md
describes the same format in prose.
"""

# No `from __future__ import annotations` here: TypedDict reads `NotRequired` from the evaluated
# annotations to know which keys are optional, and the decoder takes its key sets from that.

import re
from typing import Annotated, Any, Final, Literal, NotRequired, TypeAlias, TypedDict, Union

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
MAX_MEMBERS = 64  # the steps of one `parallel` block
MAX_TIMEOUT_MS = 24 * 3600 * 1000  # every duration in a plan (timeouts, backoff) lies in [1, this]
MIN_DURATION_MS = 1
MAX_RETRY = 10
MAX_LOOPS = 10
RetryReason = Literal["exit", "timeout", "spawn_error", "output_invalid", "stalled"]
RETRY_REASONS: tuple[RetryReason, ...] = ("exit", "timeout", "spawn_error", "output_invalid", "stalled")
# What `retry = N` retries on: every reason but `stalled`, which came later and is named explicitly
# (a plan written before it keeps its bytes and its hash).
RETRY_DEFAULT_ON: tuple[RetryReason, ...] = ("exit", "timeout", "spawn_error", "output_invalid")
MIN_STALL_MS = 1000  # `stall_after` lies in [1s, MAX_TIMEOUT_MS]
NotifyEvent = Literal["blocked", "budget", "completed", "failed", "stalled"]
NOTIFY_EVENTS: tuple[NotifyEvent, ...] = ("blocked", "budget", "completed", "failed", "stalled")
OnStall = Literal["terminate"]  # `on_stall`; its default, `warn`, is written as the key's absence
OnError = Literal["fail", "continue"]
ON_ERROR: tuple[OnError, ...] = ("fail", "continue")
# The third-edition constructs a plan may use (`plan.features`, derived by akm_run.features).
Feature = Literal["exclusive", "keepGoing", "notify", "parallel", "stall", "tokens", "worktree"]
FEATURES: tuple[Feature, ...] = ("exclusive", "keepGoing", "notify", "parallel", "stall", "tokens", "worktree")
# How a unit's attempts are isolated from each other (`isolation = worktree`; absent: none).
Isolation = Literal["worktree"]
ISOLATED_TARGETS = ("shell", "script", "agent")  # the targets that run a process in a directory

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

# -- field metadata ----------------------------------------------------------------------------------------


# Plain classes rather than NamedTuple or dataclasses: this module is on `akmc check`'s start-up
# path, and those build each class with `exec` (about 0.15 ms apiece).


class Range:
    """An integer field's bounds, both included."""

    __slots__ = ("high", "low")

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high


class Pattern:
    """A string field matches this pattern in full."""

    __slots__ = ("regex",)

    def __init__(self, regex: "re.Pattern[str]") -> None:
        self.regex = regex


class Items:
    """An array field's length bounds, both included."""

    __slots__ = ("high", "low")

    def __init__(self, low: int = 0, high: int = MAX_INT) -> None:
        self.low, self.high = low, high


class SortedBy:
    """An array of objects is sorted by this key, and no two entries share it."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


class Entries:
    """A name-keyed object field holds at most this many entries."""

    __slots__ = ("high",)

    def __init__(self, high: int) -> None:
        self.high = high


class IsSchema:
    """An object field that is a JSON Schema (draft 2020-12), checked by akm_run.schemas."""

    __slots__ = ()


# -- the shape -------------------------------------------------------------------------------------------

Schema: TypeAlias = Annotated[dict[str, Any], IsSchema()]
Name: TypeAlias = Annotated[str, Pattern(NAME)]
StepId: TypeAlias = Annotated[str, Pattern(STEP_ID)]
Ref: TypeAlias = Annotated[str, Pattern(REF)]
Sha256: TypeAlias = Annotated[str, Pattern(SHA256)]
Reference: TypeAlias = Annotated[str, Pattern(REFERENCE)]
Millis: TypeAlias = Annotated[int, Range(MIN_DURATION_MS, MAX_TIMEOUT_MS)]
# Any JSON value (`Any` means exactly that throughout this module): a literal, a default, a case.


class ShellTarget(TypedDict):
    kind: Literal["shell"]
    command: str


class ScriptTarget(TypedDict):
    kind: Literal["script"]
    path: Ref
    sha256: Sha256
    text: str


class AgentTarget(TypedDict):
    kind: Literal["agent"]
    instructions: str
    path: NotRequired[Ref]


class ApprovalTarget(TypedDict):
    kind: Literal["approval"]
    message: str


class LiteralBinding(TypedDict):
    name: Name
    kind: Literal["literal"]
    value: Any


ReferenceBinding = TypedDict("ReferenceBinding", {"name": Name, "kind": Literal["reference"], "from": Reference})
ItemBinding = TypedDict(
    "ItemBinding", {"name": Name, "kind": Literal["item"], "from": Annotated[str, Pattern(ITEM_REFERENCE)]}
)
Binding: TypeAlias = Union[LiteralBinding, ReferenceBinding, ItemBinding]


class ChildTarget(TypedDict):
    kind: Literal["child-workflow"]
    ref: Ref
    planHash: Sha256
    plan: "Plan"
    bindings: NotRequired[Annotated[list[Binding], Items(low=1), SortedBy("name")]]


Target: TypeAlias = Union[ShellTarget, ScriptTarget, AgentTarget, ApprovalTarget, ChildTarget]
CheckTarget: TypeAlias = Union[ShellTarget, ScriptTarget]


class Gate(TypedDict):
    check: CheckTarget
    maxLoops: Annotated[int, Range(1, MAX_LOOPS)]


class Retry(TypedDict):
    max: Annotated[int, Range(1, MAX_RETRY)]
    on: Annotated[list[RetryReason], Items(1, len(RETRY_REASONS))]
    backoffMs: NotRequired[Millis]


class EnvLiteral(TypedDict):
    name: Name
    kind: Literal["literal"]
    value: str


class EnvSecret(TypedDict):
    name: Name
    kind: Literal["secret"]
    secret: Name


class EnvPassthrough(TypedDict):
    name: Name
    kind: Literal["passthrough"]


EnvEntry: TypeAlias = Union[EnvLiteral, EnvSecret, EnvPassthrough]


class _Member(TypedDict):
    """What every step has; a step of a `parallel` block has nothing more (it has no `index`)."""

    stepId: StepId
    onError: OnError
    inputs: NotRequired[Annotated[list[Reference], Items(low=1)]]
    outputSchema: NotRequired[Schema]


class _Step(_Member):
    """What every step of the spine has: its place on it."""

    index: Annotated[int, Range(0, MAX_STEPS - 1)]


class _Work(_Member):
    """What a step that runs units has (a unit or a map step)."""

    target: Target
    gate: NotRequired[Gate]
    retry: NotRequired[Retry]
    timeoutMs: NotRequired[Millis]
    maxTokens: NotRequired[Annotated[int, Range(1, MAX_INT)]]  # per unit, over its attempts (agent only)
    env: NotRequired[Annotated[list[EnvEntry], Items(low=1), SortedBy("name")]]
    stallAfterMs: NotRequired[Annotated[int, Range(MIN_STALL_MS, MAX_TIMEOUT_MS)]]
    onStall: NotRequired[OnStall]
    # Each attempt runs in its own git worktree at the run's base commit (shell, script, agent only).
    isolation: NotRequired[Isolation]


class MemberUnit(_Work):
    kind: Literal["unit"]


class _MapWork(_Work):
    over: Reference
    concurrency: Annotated[int, Range(1, MAX_CONCURRENCY)]
    # `fail_fast = false`: every item runs whatever its siblings do (absent when true; "keepGoing").
    failFast: NotRequired[Literal[False]]


class MemberMap(_MapWork):
    kind: Literal["map"]


class UnitStep(MemberUnit, _Step):
    kind: Literal["unit"]


class MapStep(MemberMap, _Step):
    kind: Literal["map"]


class Case(TypedDict):
    match: Any
    next: StepId


class RouteStep(_Step):
    kind: Literal["route"]
    input: Reference
    cases: list[Case]
    default: NotRequired[StepId]


Member: TypeAlias = Union[MemberUnit, MemberMap]  # a step of a `parallel` block: a unit or a map


class ParallelStep(TypedDict):
    """Steps that run at once (`parallel`): one position on the spine, its members in source order."""

    stepId: StepId
    index: Annotated[int, Range(0, MAX_STEPS - 1)]
    onError: OnError
    kind: Literal["parallel"]
    members: Annotated[list[Member], Items(1, MAX_MEMBERS)]
    concurrency: NotRequired[Annotated[int, Range(1, MAX_CONCURRENCY)]]  # absent: every member at once
    failFast: NotRequired[Literal[False]]


Step: TypeAlias = Union[UnitStep, MapStep, RouteStep, ParallelStep]
WorkStep: TypeAlias = Union[MemberUnit, MemberMap]  # a unit or map step, of the spine or of a block
AnyStep: TypeAlias = Union[Step, Member]  # a step of the spine or of a block


class Notify(TypedDict):
    """The workflow's `notify` section: which events of a top-level run it is sent, and its notifier."""

    on: Annotated[list[NotifyEvent], Items(1, len(NOTIFY_EVENTS))]  # sorted, unique
    target: CheckTarget
    env: NotRequired[Annotated[list[EnvEntry], Items(low=1), SortedBy("name")]]
    timeoutMs: NotRequired[Millis]
    retry: NotRequired[Retry]


class Param(TypedDict):
    schema: Schema
    default: NotRequired[Any]
    description: NotRequired[str]


Output = TypedDict("Output", {"from": Reference, "schema": NotRequired[Schema]})


class ExclusiveParam(TypedDict):
    """One unsettled top-level run per (ref, value of this param)."""

    param: Name


class Limits(TypedDict):
    concurrency: Annotated[int, Range(1, MAX_CONCURRENCY)]
    maxUnits: NotRequired[Annotated[int, Range(1, MAX_INT)]]
    timeoutMs: NotRequired[Millis]
    maxTokens: NotRequired[Annotated[int, Range(1, MAX_INT)]]  # the run and every child it composes
    # `true`: one unsettled top-level run of the ref per store; the decoder checks that a param is declared.
    exclusive: NotRequired[Union[Literal[True], ExclusiveParam]]


class ReadEntry(TypedDict):
    """A file the plan was compiled from: `.akm` sources by path only, scripts and prompts with their hash."""

    path: Ref
    sha256: NotRequired[Sha256]


class Plan(TypedDict):
    irVersion: Literal[1]
    ref: Ref
    title: str
    sourceReadSet: Annotated[list[ReadEntry], Items(low=1), SortedBy("path")]
    limits: Limits
    steps: Annotated[list[Step], Items(high=MAX_STEPS)]
    description: NotRequired[str]
    params: NotRequired[Annotated[dict[Name, Param], Entries(MAX_PARAMS)]]
    outputs: NotRequired[Annotated[dict[Name, Output], Entries(MAX_OUTPUTS)]]
    notify: NotRequired[Notify]
    # Sorted and unique; the decoder derives the same list from the plan (akm_run.features).
    features: NotRequired[Annotated[list[Feature], Items(1, len(FEATURES))]]


class PlanFile(TypedDict):
    format: Literal["akm-plan"]
    planHash: Sha256
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
