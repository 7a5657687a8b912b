"""The model a resolved workflow settles into (akmc.resolve builds it; typing, lowering and the
language server read it): its steps with their settled settings, its sections and references."""

from __future__ import annotations

from akmc import ast
from akmc.notifying import NotifyModel
from akmc.records import field, record
from akmc.settings import DEFAULT_CONCURRENCY, HONOURED
from akmc.settings import Retry as Retry


@record
class StepModel:
    """One step after structural checks; `kind` is None when the step is unusable. `index` is its
    place among every step in source order (a `parallel` block before its members); `spine` its
    place on the spine (a member shares its block's), `group` the block a member stands in."""

    step: ast.Step
    index: int
    kind: str | None = None
    spine: int = 0
    group: str | None = None
    members: list[str] = field(default_factory=list)  # a `parallel` block's, in source order
    block_concurrency: int | None = None  # a `parallel` block's `concurrency`, when set
    target: ast.Target | None = None
    map: ast.MapBlock | None = None
    route: ast.RouteBlock | None = None
    gate_check: ast.Target | None = None
    max_loops: int = 1
    has_gate: bool = False
    env: dict[str, ast.EnvEntry] = field(default_factory=dict)
    inputs: list[ast.Reference] = field(default_factory=list)
    output: ast.TypeExpr | None = None
    timeout_ms: int | None = None
    retry: Retry | None = None
    on_error: str | None = None
    stall_after_ms: int | None = None
    on_stall: str | None = None  # "terminate" only; `warn` is the default
    isolation: str | None = None  # "worktree", or None: the attempts run in the workdir
    concurrency: int = DEFAULT_CONCURRENCY
    max_tokens: int | None = None
    fail_fast: bool = True  # a map's: `false` runs every item whatever its siblings do (operations.md D3)

    @property
    def id(self) -> str:
        return self.step.id.text

    @property
    def target_kind(self) -> str | None:
        """The kind that decides which settings the step honours (see HONOURED); None when unusable."""
        if self.kind in ("route", "parallel"):
            return self.kind
        if self.target is None:
            return None
        return self.target.kind if self.target.kind in ("uses", "approval") else "unit"

    def honours(self, setting: str) -> bool:
        kind = self.target_kind
        if kind is None:
            return True  # an unusable step is reported already; do not pile on
        if setting == "max_tokens":  # only an agent reports usage (a map honours it over `agent`)
            return self.target is not None and self.target.kind == "agent"
        return setting in HONOURED[kind] or (setting in ("concurrency", "fail_fast") and self.kind == "map")


@record
class Model:
    workflow: ast.Workflow
    description: ast.Text | None = None
    params: dict[str, ast.Param] = field(default_factory=dict)
    outputs: dict[str, ast.OutputDecl] = field(default_factory=dict)
    steps: list[StepModel] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY
    max_units: int | None = None
    max_tokens: int | None = None
    timeout_ms: int | None = None
    default_max_tokens: int | None = None
    exclusive: bool | ast.Reference | None = None  # `limits { exclusive = true | params.NAME }`
    default_timeout_ms: int | None = None
    default_retry: Retry | None = None
    default_on_error: str | None = None
    default_stall_after_ms: int | None = None
    default_on_stall: str | None = None
    default_stall_written: dict[str, ast.Setting] = field(default_factory=dict)  # as written, even if invalid
    default_on_stall_reaches: bool = False  # whether a step with a `stall_after` takes the default `on_stall`
    default_stall_outlasted: bool = False  # whether W707 was said of the default `stall_after` (said once)
    default_isolation: str | None = None
    default_env: dict[str, ast.EnvEntry] = field(default_factory=dict)
    notify: NotifyModel | None = None
    # (reference, reader index, whether `item` may stand there): every reference, wherever it stands
    references: list[tuple[ast.Reference, int, bool]] = field(default_factory=list)
