"""The typed syntax tree of one `.akm` file: plain slotted classes, every node with its span.

The classes are records (`akmc.records`): they behave like `@dataclass(slots=True)` ones
(positional and keyword `__init__`, field-wise `==` between nodes of one class, unhashable,
`Name(field=value, …)` repr, `__match_args__`), with their methods generated in one compile for
the whole module."""

from __future__ import annotations

from typing import Union

from akmc.records import build, field
from akmc.records import record as node
from akmc.spans import Span as Span  # re-exported: every node carries one


@node
class Ident:
    text: str
    span: Span


@node
class StrLit:
    value: str
    span: Span


# -- values -----------------------------------------------------------------


@node
class Literal:
    """A JSON scalar: string, int, float, bool or None. `invalid` when the parser reported it (E102:
    out of range or malformed, `value` then a placeholder): later stages skip it silently."""

    value: str | int | float | bool | None
    span: Span
    invalid: bool = False


@node
class ListValue:
    items: list[Value]
    span: Span


@node
class ObjectValue:
    entries: list[tuple[Ident, Value]]
    span: Span


@node
class Duration:
    """A duration, already lowered to milliseconds (only in settings); -1 when it was invalid (E102)."""

    ms: int
    text: str
    span: Span


@node
class Word:
    """A bare word such as `fail` or `timeout` (only in settings)."""

    text: str
    span: Span


Value = Union[Literal, ListValue, ObjectValue, Duration, Word]


# -- references ---------------------------------------------------------------


@node
class Segment:
    """One path step after `output`: `.name` (field) or `[n]` (index)."""

    field: str | None
    index: int | None
    span: Span

    def render(self) -> str:
        return f".{self.field}" if self.field is not None else f"[{self.index}]"


@node
class Reference:
    """`params.NAME` (root "params"), `steps.ID.output<segments>` (root "steps") or `item<segments>`
    (root "item": the current element inside a `map` block)."""

    root: str
    name: Ident
    segments: list[Segment]
    span: Span

    @property
    def text(self) -> str:
        if self.root == "params":
            return f"params.{self.name.text}"
        if self.root == "item":
            return "item" + "".join(s.render() for s in self.segments)
        return f"steps.{self.name.text}.output" + "".join(s.render() for s in self.segments)


# -- types --------------------------------------------------------------------


@node
class Refinement:
    name: Ident
    value: Value
    span: Span


@node
class NamedType:
    """`string`, `int`, `list[T]`, `map[T]` … with optional refinements."""

    name: Ident
    arg: TypeExpr | None
    refinements: list[Refinement]
    span: Span


@node
class FieldDecl:
    name: Ident
    optional: bool
    type: TypeExpr
    span: Span


@node
class ObjectType:
    fields: list[FieldDecl]
    span: Span


@node
class LiteralType:
    literal: Literal
    span: Span


@node
class UnionType:
    members: list[TypeExpr]
    span: Span


TypeExpr = Union[NamedType, ObjectType, LiteralType, UnionType]


# -- workflow items -------------------------------------------------------------


@node
class Text:
    """Prose: a string, a text block (already dedented) or `file("path")` (read later)."""

    kind: str  # "string" | "block" | "file"
    value: str  # the text, or the path for kind "file"
    span: Span


@node
class Setting:
    name: Ident
    value: Value | Reference  # a reference only where a setting takes one (`exclusive`)
    span: Span


@node
class EnvEntry:
    name: Ident
    kind: str  # "literal" | "secret" | "passthrough"
    value: str | None  # the literal, or the secret's variable name
    span: Span
    value_span: Span


@node
class Env:
    entries: list[EnvEntry]
    span: Span


@node
class Binding:
    name: Ident
    value: Value | Reference
    span: Span


@node
class Target:
    """One dispatchable thing: shell, script, agent, uses or approval."""

    kind: str
    span: Span
    keyword_span: Span
    text: Text | None = None  # shell, agent, approval
    path: StrLit | None = None  # script path, uses ref
    bindings: list[Binding] | None = None  # uses


@node
class MapBlock:
    over: Reference
    items: list[Target | Setting | Env]
    span: Span


@node
class RouteCase:
    match: Literal | None  # None for `_`
    target: Ident
    span: Span


@node
class RouteBlock:
    subject: Reference
    cases: list[RouteCase]
    span: Span


@node
class GateCheck:
    target: Target
    span: Span


@node
class Gate:
    items: list[GateCheck | Setting]
    span: Span


@node
class Inputs:
    refs: list[Reference]
    span: Span


@node
class OutputType:
    type: TypeExpr
    span: Span


StepItem = Union[Target, MapBlock, RouteBlock, Gate, Env, Inputs, OutputType, Setting]


@node
class Step:
    """A step, or with `members` a `parallel` block (its `items` then are its settings, and a nested
    block among its members is reported, E211)."""

    id: Ident
    items: list[StepItem]
    span: Span
    members: list[Step] | None = None

    @property
    def is_block(self) -> bool:
        return self.members is not None


@node
class Param:
    name: Ident
    type: TypeExpr
    default: Value | None
    description: StrLit | None
    span: Span


@node
class OutputDecl:
    name: Ident
    type: TypeExpr | None
    source: Reference
    span: Span


@node
class Section:
    """A workflow-level block: description, params, outputs, limits, defaults or notify."""

    kind: str
    span: Span
    keyword_span: Span
    description: Text | None = None
    params: list[Param] = field(default_factory=list)
    outputs: list[OutputDecl] = field(default_factory=list)
    settings: list[Setting | Env] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)  # notify


@node
class Workflow:
    title: StrLit
    sections: list[Section]
    steps: list[Step]  # the spine: steps and `parallel` blocks, in source order
    span: Span

    def every_step(self) -> list[Step]:
        """Every step in source order: a block, then its members (nested ones too), then what follows."""
        return [each for step in self.steps for each in _flattened(step)]


def _flattened(step: Step) -> list[Step]:
    return [step, *(each for member in step.members or [] for each in _flattened(member))]


build()
