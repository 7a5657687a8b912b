"""Pydantic models of the plan file format; `akmc schema` publishes their JSON Schema.

The format is stated once, in akm_run.planformat: these models take every bound and pattern from
there, and the runtime's strict decoder (akm_run.plan) builds its checks from the same definition.
A test proves the two accept and refuse the same plans at every limit.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from akm_run.planformat import (
    ITEM_REFERENCE,
    MAX_CONCURRENCY,
    MAX_INT,
    MAX_LOOPS,
    MAX_OUTPUTS,
    MAX_PARAMS,
    MAX_RETRY,
    MAX_STEPS,
    MAX_TIMEOUT_MS,
    MIN_DURATION_MS,
    NAME,
    REF,
    REFERENCE,
    RETRY_REASONS,
    SHA256,
    STEP_ID,
    OnError,
    RetryReason,
    json_schema_pattern,
)

Sha = Annotated[str, Field(pattern=json_schema_pattern(SHA256))]
StepId = Annotated[str, Field(pattern=json_schema_pattern(STEP_ID))]
Name = Annotated[str, Field(pattern=json_schema_pattern(NAME))]
Ref = Annotated[str, Field(pattern=json_schema_pattern(REF))]
Reference = Annotated[str, Field(pattern=json_schema_pattern(REFERENCE))]
Millis = Annotated[int, Field(ge=MIN_DURATION_MS, le=MAX_TIMEOUT_MS)]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Shell(Closed):
    kind: Literal["shell"]
    command: str


class Script(Closed):
    kind: Literal["script"]
    path: Ref
    sha256: Sha
    text: str


class Agent(Closed):
    kind: Literal["agent"]
    instructions: str
    path: Ref | None = None


class Approval(Closed):
    kind: Literal["approval"]
    message: str


class LiteralBinding(Closed):
    name: Name
    kind: Literal["literal"]
    value: Any


class ReferenceBinding(Closed):
    name: Name
    kind: Literal["reference"]
    from_: Reference = Field(alias="from")


class ItemBinding(Closed):
    """The current element of a map step (or a path into it); only in a map step's target."""

    name: Name
    kind: Literal["item"]
    from_: Annotated[str, Field(pattern=json_schema_pattern(ITEM_REFERENCE))] = Field(alias="from")


class ChildWorkflow(Closed):
    kind: Literal["child-workflow"]
    ref: Ref
    bindings: (
        list[Annotated[Union[LiteralBinding, ReferenceBinding, ItemBinding], Field(discriminator="kind")]] | None
    ) = Field(default=None, min_length=1)
    planHash: Sha
    plan: Plan


Target = Annotated[Union[Shell, Script, Agent, Approval, ChildWorkflow], Field(discriminator="kind")]


class Gate(Closed):
    check: Annotated[Union[Shell, Script], Field(discriminator="kind")]
    maxLoops: int = Field(ge=1, le=MAX_LOOPS)


class Retry(Closed):
    max: int = Field(ge=1, le=MAX_RETRY)
    on: list[RetryReason] = Field(min_length=1, max_length=len(RETRY_REASONS))
    backoffMs: Millis | None = None


class EnvLiteral(Closed):
    name: Name
    kind: Literal["literal"]
    value: str


class EnvSecret(Closed):
    name: Name
    kind: Literal["secret"]
    secret: Name


class EnvPassthrough(Closed):
    name: Name
    kind: Literal["passthrough"]


Env = Annotated[Union[EnvLiteral, EnvSecret, EnvPassthrough], Field(discriminator="kind")]


class StepBase(Closed):
    stepId: StepId
    index: int = Field(ge=0, le=MAX_STEPS - 1)
    inputs: list[Reference] | None = Field(default=None, min_length=1)
    outputSchema: dict[str, Any] | None = None
    onError: OnError


class WorkStep(StepBase):
    target: Target
    gate: Gate | None = None
    retry: Retry | None = None
    timeoutMs: Millis | None = None
    env: list[Env] | None = Field(default=None, min_length=1)


class UnitStep(WorkStep):
    kind: Literal["unit"]


class MapStep(WorkStep):
    kind: Literal["map"]
    over: Reference
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)


class Case(Closed):
    match: Any
    next: StepId


class RouteStep(StepBase):
    kind: Literal["route"]
    input: Reference
    cases: list[Case]
    default: StepId | None = None


class Param(Closed):
    schema_: dict[str, Any] = Field(alias="schema")
    default: Any = None
    description: str | None = None


class Output(Closed):
    from_: Reference = Field(alias="from")
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class Limits(Closed):
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY)
    maxUnits: int | None = Field(default=None, ge=1, le=MAX_INT)
    timeoutMs: Millis | None = None


class ReadEntry(Closed):
    path: Ref
    sha256: Sha | None = None  # absent for an `.akm` source: the plan carries its meaning


class Plan(Closed):
    irVersion: Literal[1]
    ref: Ref
    title: str
    description: str | None = None
    sourceReadSet: list[ReadEntry] = Field(min_length=1)
    params: dict[Name, Param] | None = Field(default=None, max_length=MAX_PARAMS)
    outputs: dict[Name, Output] | None = Field(default=None, max_length=MAX_OUTPUTS)
    limits: Limits
    steps: list[Annotated[Union[UnitStep, MapStep, RouteStep], Field(discriminator="kind")]] = Field(
        max_length=MAX_STEPS
    )


class PlanFile(Closed):
    format: Literal["akm-plan"]
    planHash: Sha
    plan: Plan


def plan_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan file."""
    document: dict[str, Any] = _exact(PlanFile.model_json_schema(by_alias=True))
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "akm plan file (irVersion 1)"
    return document


def _exact(node: Any) -> Any:
    """The schema pydantic generates, made as strict as the decoder where it is looser: an optional
    key is absent, never `null`; a map's keys must all match its name pattern."""
    if isinstance(node, list):
        return [_exact(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _exact(value) for key, value in node.items()}
    members = node.get("anyOf")
    if isinstance(members, list) and {"type": "null"} in members and "default" in node and node["default"] is None:
        rest = [m for m in members if m != {"type": "null"}]
        node.pop("default")
        node.pop("anyOf")
        node = {**node, **rest[0]} if len(rest) == 1 else {**node, "anyOf": rest}
    if "patternProperties" in node:
        node["additionalProperties"] = False
    return node
