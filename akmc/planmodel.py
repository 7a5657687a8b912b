"""Pydantic models of the plan file format; `akmc schema` publishes their JSON Schema.

The runtime's strict decoder (akm_run.plan) is the one definition of a valid
plan; these models describe the same shape for editors and other tools, and a
test proves both accept every golden plan.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

Sha = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
StepId = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")]
Name = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Reference = Annotated[
    str,
    Field(
        pattern=r"^(params\.[A-Za-z_][A-Za-z0-9_]*|steps\.[A-Za-z_][A-Za-z0-9_-]*\.output(\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*)$"
    ),
]
Millis = Annotated[int, Field(ge=1, le=24 * 3600 * 1000)]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Shell(Closed):
    kind: Literal["shell"]
    command: str


class Script(Closed):
    kind: Literal["script"]
    path: str
    sha256: Sha
    text: str


class Agent(Closed):
    kind: Literal["agent"]
    instructions: str
    path: str | None = None


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
    from_: Annotated[str, Field(pattern=r"^item(\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*$")] = Field(alias="from")


class ChildWorkflow(Closed):
    kind: Literal["child-workflow"]
    ref: str
    bindings: (
        list[Annotated[Union[LiteralBinding, ReferenceBinding, ItemBinding], Field(discriminator="kind")]] | None
    ) = Field(default=None, min_length=1)
    planHash: Sha
    plan: Plan


Target = Annotated[Union[Shell, Script, Agent, Approval, ChildWorkflow], Field(discriminator="kind")]


class Gate(Closed):
    check: Annotated[Union[Shell, Script], Field(discriminator="kind")]
    maxLoops: int = Field(ge=1, le=10)


class Retry(Closed):
    max: int = Field(ge=1, le=10)
    on: list[Literal["exit", "timeout", "spawn_error", "output_invalid"]] = Field(min_length=1)
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
    index: int = Field(ge=0, le=255)
    inputs: list[Reference] | None = Field(default=None, min_length=1)
    outputSchema: dict[str, Any] | None = None
    onError: Literal["fail", "continue"]


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
    concurrency: int = Field(ge=1, le=64)


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
    concurrency: int = Field(ge=1, le=64)
    maxUnits: int | None = Field(default=None, ge=1)
    timeoutMs: Millis | None = None


class ReadEntry(Closed):
    path: str
    sha256: Sha | None = None  # absent for an `.akm` source: the plan carries its meaning


class Plan(Closed):
    irVersion: Literal[1]
    ref: str
    title: str
    description: str | None = None
    sourceReadSet: list[ReadEntry] = Field(min_length=1)
    params: dict[Name, Param] | None = Field(default=None, max_length=64)
    outputs: dict[Name, Output] | None = Field(default=None, max_length=64)
    limits: Limits
    steps: list[Annotated[Union[UnitStep, MapStep, RouteStep], Field(discriminator="kind")]] = Field(max_length=256)


class PlanFile(Closed):
    format: Literal["akm-plan"]
    planHash: Sha
    plan: Plan


def plan_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan file."""
    document = PlanFile.model_json_schema(by_alias=True)
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "akm plan file (irVersion 1)"
    return document
