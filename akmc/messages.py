"""Every diagnostic's wording, beside its code: the one place a message is written.

Each entry is a typed template (as pyflakes' `messages.py` and mypy's `message_registry.py` keep
theirs): `messages.unknown_step(step="reviw", ref="steps.reviw.output")` is the E203 `Message`.
A checker names an entry, never a code, so a code cannot be misspelled; the entry's keyword-only
parameters are its template's fields, so mypy checks every call. A help line that never varies
lives here too; one that depends on the source (a did-you-mean) is passed where it is reported.
A test checks that each template's fields are its parameters and that every catalog code has one."""

from __future__ import annotations

from akmc.message_templates import REGISTRY as REGISTRY
from akmc.message_templates import Message as Message
from akmc.message_templates import Template as Template
from akmc.message_templates import message

# -- E1xx: reading and parsing the source ----------------------------------------------------------


@message("E100", "values and types nest deeper than {limit} levels")
def nesting_too_deep(*, limit: int) -> None: ...
@message("E100", "unexpected character `{char}`")
def unexpected_character(*, char: str) -> None: ...
@message("E100", "unexpected character `{char}`; expected {expected}")
def unexpected_character_expected(*, char: str, expected: str) -> None: ...
@message("E100", "unexpected {found}; expected {expected}")
def unexpected_token(*, found: str, expected: str) -> None: ...
@message("E100", "unexpected end of file")
def unexpected_end() -> None: ...
@message("E101", 'unterminated text block: no closing `"""`', 'close the text block with `"""`')
def unterminated_text_block() -> None: ...
@message(
    "E101",
    'unterminated string: no closing `"` on this line',
    'strings end on the line they start; use a `"""` text block for several lines',
)
def unterminated_string() -> None: ...
@message(
    "E101",
    "lone surrogate escape `{escape}` in string",
    "a `\\uD800`-`\\uDBFF` escape must be followed by a `\\uDC00`-`\\uDFFF` one, such as `\\ud83d\\ude00`; "
    "or write the character itself",
)
def lone_surrogate(*, escape: str) -> None: ...
@message(
    "E101", "invalid escape `{escape}` in string", 'strings use JSON escapes: \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX'
)
def invalid_escape(*, escape: str) -> None: ...
@message("E102", "duration `{duration}` is out of range")
def duration_out_of_range(*, duration: str) -> None: ...
@message(
    "E102",
    "invalid duration `{duration}`",
    "write one or more <integer><unit> with units ms, s, m, h, e.g. `90s` or `1h30m`",
)
def invalid_duration(*, duration: str) -> None: ...
@message("E102", "invalid integer `{integer}`", "`_` may only separate digits, as in `1_000`")
def invalid_integer(*, integer: str) -> None: ...
@message(
    "E102",
    "integer `{integer}` is out of range",
    "integers must lie within ±(2^53 − 1) so that every JSON reader agrees on them",
)
def integer_out_of_range(*, integer: str) -> None: ...
@message("E102", "invalid number `{number}`")
def invalid_number(*, number: str) -> None: ...
@message("E103", "file exceeds the source size limit of {limit} bytes (1 MiB)")
def source_too_large(*, limit: int) -> None: ...
@message("E103", "file is not valid UTF-8: invalid byte 0x{byte:02x} at offset {offset}")
def source_not_utf8(*, byte: int, offset: int) -> None: ...


# -- E2xx: names, structure and references ---------------------------------------------------------


@message("E200", "duplicate step id `{step}`; it is first declared at {first}")
def duplicate_step(*, step: str, first: str) -> None: ...
@message("E201", "duplicate {what} `{name}`; it is first declared at {first}")
def duplicate_name(*, what: str, name: str, first: str) -> None: ...
@message("E202", "duplicate `{section}` section; the first is at {first}")
def duplicate_section(*, section: str, first: str) -> None: ...
@message("E202", "step `{step}` has two `inputs` lists")
def two_inputs(*, step: str) -> None: ...
@message("E202", "step `{step}` has two `gate` blocks")
def two_gates(*, step: str) -> None: ...
@message("E202", "step `{step}` already has a {first}; a step has exactly one", "split the work into two steps")
def second_work(*, step: str, first: str) -> None: ...
@message("E202", "step `{step}` declares `output:` twice")
def two_outputs(*, step: str) -> None: ...
@message(
    "E202",
    "step `{step}` composes a child workflow; its output type comes from the child",
    "remove `output:`; declare outputs in the child's `outputs` block",
)
def output_on_uses(*, step: str) -> None: ...
@message("E202", "a `gate` has exactly one `check`")
def two_gate_checks() -> None: ...
@message("E203", "unknown step `{step}` in reference `{ref}`")
def unknown_step(*, step: str, ref: str) -> None: ...
@message(
    "E204",
    "`{ref}` reads the step that reads it; a step may only read earlier steps",
    "move the producing step above this one",
)
def reads_itself(*, ref: str) -> None: ...
@message(
    "E204",
    "`{ref}` reads a later step (declared at {at}); a step may only read earlier steps",
    "move the producing step above this one",
)
def reads_later(*, ref: str, at: str) -> None: ...
@message("E205", "unknown param `{param}` in reference `{ref}`")
def unknown_param(*, param: str, ref: str) -> None: ...
@message(
    "E206",
    "step `{step}` has no target, `map` or `route`",
    'give it a target such as `shell "..."`, `script`, `agent`, `uses` or `approval`',
)
def no_target(*, step: str) -> None: ...
@message("E206", "a `map` block holds exactly one target; this one holds {count}")
def map_targets(*, count: int) -> None: ...
@message("E206", "a `gate` needs a `check` target")
def gate_without_check() -> None: ...
@message(
    "E207",
    "`secret({name})` does not name an environment variable",
    "a secret name is an environment variable name: letters, digits and `_`, not starting with a digit",
)
def invalid_secret_name(*, name: str) -> None: ...
@message("E207", "`{name}` cannot be set in {where}; it belongs in {home}")
def misplaced_setting(*, name: str, where: str, home: str) -> None: ...
@message("E207", "unknown setting `{name}` in {where}")
def unknown_setting(*, name: str, where: str) -> None: ...
@message("E207", "`{name}` has no effect on {what}, so it is not allowed there")
def setting_no_effect(*, name: str, what: str) -> None: ...
@message("E207", "`on_error` takes `fail` or `continue`")
def on_error_value() -> None: ...
@message("E207", "`exclusive` takes `true` or a param, `params.NAME`")
def exclusive_value() -> None: ...
@message(
    "E207",
    "`exclusive = params.{param}` needs a scalar param, not `{type}`",
    "runs are told apart by the param's value: declare it a string, a number, a bool or a set of literals",
)
def exclusive_not_scalar(*, param: str, type: str) -> None: ...
@message("E207", "`{name}` takes an integer")
def integer_setting(*, name: str) -> None: ...
@message("E207", "`{name}` takes `true` or `false`")
def boolean_setting(*, name: str) -> None: ...
@message("E207", "`{name}` takes a duration such as `30s`, `10m` or `1h30m`")
def duration_setting(*, name: str) -> None: ...
@message("E207", "`retry` takes an integer or `{{ max = N, on = [...], backoff = D }}`")
def retry_value() -> None: ...
@message("E207", "unknown `retry` field `{field}`; it takes max, on, backoff")
def unknown_retry_field(*, field: str) -> None: ...
@message("E207", "`retry` needs `max`")
def retry_needs_max() -> None: ...
@message("E207", "`retry.max` takes an integer")
def retry_max_integer() -> None: ...
@message("E207", "`retry.on` takes a list of reasons: {reasons}")
def retry_on_list(*, reasons: str) -> None: ...
@message("E207", "`{reason}` is not a retry reason; reasons: {reasons}")
def unknown_retry_reason(*, reason: str, reasons: str) -> None: ...
@message("E207", "a gate check runs `shell` or `script`, not `{kind}`")
def gate_check_kind(*, kind: str) -> None: ...
@message(
    "E208",
    "route target `{target}` is a step inside `parallel` block `{block}`; a route selects a spine step",
    "route to the block `{block}` (every member is then skipped), or move `{target}` out of it",
)
def route_to_member(*, target: str, block: str) -> None: ...
@message(
    "E210",
    "`{ref}` reads {what}; the steps of `parallel` block `{block}` run at once",
    "move `{reader}` to a block or step after `{block}`",
)
def reads_sibling(*, ref: str, what: str, block: str, reader: str) -> None: ...
@message("E211", "`parallel` block `{block}` has no steps", "put the steps that run at once inside it")
def empty_block(*, block: str) -> None: ...
@message(
    "E211",
    "`parallel` block `{block}` is inside `parallel` block `{outer}`; blocks do not nest",
    "put its steps in `{outer}` itself, or move the block after it",
)
def nested_block(*, block: str, outer: str) -> None: ...
@message(
    "E211",
    "`route` step `{step}` is inside `parallel` block `{block}`; a route selects later spine steps",
    "move the route before or after the block",
)
def route_in_block(*, step: str, block: str) -> None: ...
@message("E601", "`parallel` block `{block}` has {count} steps; a block holds at most {limit}")
def too_many_members(*, block: str, count: int, limit: int) -> None: ...
@message("E208", "route `{step}` cannot target its own step")
def route_to_itself(*, step: str) -> None: ...
@message("E208", "route target `{target}` is not a step")
def route_to_unknown(*, target: str) -> None: ...
@message("E208", "route target `{target}` comes before `{step}`; routes select later steps")
def route_backwards(*, target: str, step: str) -> None: ...
@message(
    "E209",
    "`item` is only defined inside a `map` block",
    "`item` names the current element in the bindings of a `map` block's `uses` target; "
    "shell, script and agent units inside a `map` receive it in their context",
)
def item_outside_map() -> None: ...


# -- E3xx: types -------------------------------------------------------------------------------------


@message("E300", "default of param `{name}` does not match its type {type}: {problem}")
def default_mismatch(*, name: str, type: str, problem: str) -> None: ...
@message("E300", "binding `{name}` does not match param `{name}` of child workflow {child}, which is {type}: {problem}")
def binding_mismatch(*, name: str, child: str, type: str, problem: str) -> None: ...
@message("E301", "no field `{field}` on {type} in `{ref}`")
def no_field(*, field: str, type: str, ref: str) -> None: ...
@message("E302", "`.{field}` on a value of type {type}, which has no fields")
def field_of_scalar(*, field: str, type: str) -> None: ...
@message("E302", "`[{index}]` on a value of type {type}, which is not a list")
def index_of_non_list(*, index: int | None, type: str) -> None: ...
@message("E303", "`map` over `{ref}`, whose type is {type}, not a list")
def map_over_non_list(*, ref: str, type: str) -> None: ...
@message("E304", "route case {case} can never match `{ref}` of type {type}")
def case_never_matches(*, case: str, ref: str, type: str) -> None: ...
@message("E305", "output `{name}` declares {declared}, but `{ref}` is {actual}")
def output_mismatch(*, name: str, declared: str, ref: str, actual: str) -> None: ...
@message("E305", "map step `{step}` declares output {declared}, but a map's output is a list, one element per item")
def map_output_not_list(*, step: str, declared: str) -> None: ...
@message("E306", "unknown type `{name}`")
def unknown_type(*, name: str) -> None: ...
@message("E306", "`{name}` needs an element type, as in `{name}[string]`")
def needs_element_type(*, name: str) -> None: ...
@message("E306", "`{name}` takes no element type")
def no_element_type(*, name: str) -> None: ...
@message("E306", "`{name}` does not take the refinement `{key}`; it takes {takes}")
def foreign_refinement(*, name: str, key: str, takes: str) -> None: ...
@message("E306", "`pattern` takes a string (a regular expression)")
def pattern_not_string() -> None: ...
@message("E306", "invalid `pattern`: {error}")
def invalid_pattern(*, error: str) -> None: ...
@message(
    "E306",
    "`pattern` may take exponential time to match: {why}",
    "rewrite it so that each character can be matched in only one way, or use an atomic group `(?>...)` "
    "or a possessive quantifier such as `a++`",
)
def slow_pattern(*, why: str) -> None: ...
@message("E306", "`{key}` on `{name}` takes {kind}")
def refinement_kind(*, key: str, name: str, kind: str) -> None: ...
@message("E306", "`{key}` takes a non-negative integer")
def refinement_not_count(*, key: str) -> None: ...
@message("E306", "`{low}` ({low_value}) is greater than `{high}` ({high_value})")
def refinement_bounds(*, low: str, low_value: object, high: str, high_value: object) -> None: ...
@message(
    "E307",
    "binding `{name}` passes `{value}` of type {value_type}, "
    "but param `{name}` of child workflow {child} is {param_type}",
)
def binding_type(*, name: str, value: str, value_type: str, child: str, param_type: str) -> None: ...


# -- E4xx: composition ------------------------------------------------------------------------------


@message("E400", "child workflow ref `{ref}` names a file; a ref has no `{suffix}` suffix")
def child_ref_is_file(*, ref: str, suffix: str) -> None: ...
@message("E400", "`{ref}` is not a workflow ref: refs are root-relative paths like `workflows/release`, with no `..`")
def not_a_ref(*, ref: str) -> None: ...
@message("E400", "child workflow `{ref}` resolves outside the workspace root through a symlink")
def child_outside_root(*, ref: str) -> None: ...
@message("E400", "child workflow `{ref}` cannot be resolved: {why}")
def child_unresolvable(*, ref: str, why: str) -> None: ...
@message("E400", "child workflow `{ref}` not found: there is no `{ref}{suffix}` under the workspace root")
def child_not_found(*, ref: str, suffix: str) -> None: ...
@message("E400", "child workflow `{ref}` cannot be read: {why}")
def child_unreadable(*, ref: str, why: str) -> None: ...
@message("E401", "composition cycle: {path}", "a workflow cannot compose itself, directly or through its children")
def composition_cycle(*, path: str) -> None: ...
@message(
    "E402",
    "composing {child} nests child workflows {levels} levels deep ({chain}); the limit is {limit} below the root",
    "flatten the composition: inline a level or compose the deep part from a higher workflow",
)
def composition_too_deep(*, child: str, levels: int, chain: str, limit: int) -> None: ...
@message(
    "E403",
    "embedded child plans reach {total} bytes here ({child} adds {adds}); "
    "the limit is {limit} bytes (1 MiB) across all levels",
    "compose fewer or smaller children; large scripts and prompts count once per embedded copy",
)
def embedded_too_large(*, total: int, child: str, adds: int, limit: int) -> None: ...
@message(
    "E404",
    "the plan is {size} bytes of canonical JSON; the limit is {limit} bytes (4 MiB)",
    "every `script` and `file(...)` is frozen into the plan once per use: share one step instead of copying",
)
def plan_too_large(*, size: int, limit: int) -> None: ...
@message(
    "E404",
    "the plan is {size} bytes of canonical JSON; the limit is {limit} bytes (4 MiB); the largest step is `{step}`",
    "every `script` and `file(...)` is frozen into the plan once per use: share one step instead of copying",
)
def plan_too_large_at(*, size: int, limit: int, step: str) -> None: ...
@message("E405", "child workflow {child} has no param `{name}`")
def unknown_child_param(*, child: str, name: str) -> None: ...
@message(
    "E406",
    "step `{step}` composes {child} without binding its required param `{name}` ({type})",
    "add `{name} = ...` to the bindings, or give the param a default in the child",
)
def unbound_param(*, step: str, child: str, name: str, type: str) -> None: ...
@message(
    "E407",
    'step {step} reads "{ref}", but child workflow {child} exports outputs: {outputs}. '
    "Declare the output in the child's outputs block, or reference one of the names above.",
)
def not_exported(*, step: str, ref: str, child: str, outputs: str) -> None: ...
@message(
    "E407",
    'step {step} reads "{ref}", but child workflow {child} exports only {{runId, status}}: it declares '
    "no outputs. Declare the output in the child's outputs block, or reference runId or status.",
)
def no_outputs_exported(*, step: str, ref: str, child: str) -> None: ...
@message(
    "E408",
    "child workflow {child} has errors; they are reported at {file}",
    "fix the child first: this workflow cannot be compiled while a child it composes fails",
)
def child_has_errors(*, child: str, file: str) -> None: ...


# -- E5xx: workspace files ----------------------------------------------------------------------------


@message("E500", "{what} `{path}` not found in the workspace")
def file_not_found(*, what: str, path: str) -> None: ...
@message("E500", "{what} `{path}` not found in the workspace ({why})")
def file_unreadable(*, what: str, path: str, why: str) -> None: ...
@message("E501", "{what} path `{path}` is absolute; paths are relative to the workspace root")
def path_absolute(*, what: str, path: str) -> None: ...
@message("E501", "{what} path `{path}` contains `..` and may leave the workspace root")
def path_climbs(*, what: str, path: str) -> None: ...
@message("E501", "{what} path `{path}` resolves outside the workspace root through a symlink")
def path_escapes(*, what: str, path: str) -> None: ...
@message(
    "E501",
    "{what} path `{path}` is not a portable name: a plan names files with ASCII letters, digits, `_`, `.`, `-` and `/`",
    "rename it (no spaces or non-ASCII characters): the plan must name it the same on every machine",
)
def path_not_portable(*, what: str, path: str) -> None: ...
@message(
    "E501",
    "workflow file `{path}` has no portable ref: a plan names workflows with ASCII letters, digits, `_`, `.`, `-` and `/`",
    "rename the file (no spaces or non-ASCII characters), for example to `{suggestion}`",
)
def source_name_not_portable(*, path: str, suggestion: str) -> None: ...
@message("E502", "{what} `{path}` exceeds {limit_kib} KiB")
def file_too_large(*, what: str, path: str, limit_kib: int) -> None: ...
@message("E502", "{what} `{path}` is not UTF-8 text")
def file_not_utf8(*, what: str, path: str) -> None: ...
@message(
    "E502", "script `{path}` has no `#!` line", "start it with a line such as `#!/bin/sh` or `#!/usr/bin/env python3`"
)
def script_without_shebang(*, path: str) -> None: ...


# -- E6xx: secrets and limits ----------------------------------------------------------------------


@message(
    "E600",
    "env `{name}` holds what looks like {found}; a plan must never contain a secret",
    'read it at dispatch instead: `{name} = secret("{name}")`, and rotate the credential',
)
def credential_in_env(*, name: str, found: str) -> None: ...
@message(
    "E600",
    "{what} holds what looks like {found}; a plan must never contain a secret",
    'read it at dispatch instead: `env {{ TOKEN = secret("TOKEN") }}` and use `$TOKEN`, and rotate the credential',
)
def credential_in_text(*, what: str, found: str) -> None: ...
@message("E601", "more than {limit} steps in one workflow")
def too_many_steps(*, limit: int) -> None: ...
@message("E601", "more than {limit} params")
def too_many_params(*, limit: int) -> None: ...
@message("E601", "more than {limit} outputs")
def too_many_outputs(*, limit: int) -> None: ...
@message("E601", "`{name}` must be at least 1, not {value}")
def setting_below_one(*, name: str, value: int) -> None: ...
@message("E601", "`max_loops` is at most {limit}, not {value}")
def too_many_loops(*, limit: int, value: int) -> None: ...
@message("E601", "`{name}` must be longer than zero")
def zero_duration(*, name: str) -> None: ...
@message("E601", "`{name} = {duration}` exceeds the 24h bound")
def duration_over_bound(*, name: str, duration: str) -> None: ...
@message("E601", "`retry` max must lie within 0..{limit}, not {value}")
def retry_out_of_range(*, limit: int, value: int) -> None: ...


# -- W7xx: warnings ------------------------------------------------------------------------------------


@message("W700", "param `{param}` is declared but never referenced")
def unused_param(*, param: str) -> None: ...
@message(
    "W701",
    "route on `{ref}` does not cover {missing} and has no `_` case",
    "add the missing cases or a `_ -> step` default",
)
def route_not_covered(*, ref: str, missing: str) -> None: ...
@message(
    "W702",
    "step `{reader}` reads `{ref}`, but route step `{route}` may skip step `{step}`",
    "when it is skipped its output is null: this step reads null, and a path beneath it fails input_unresolved",
)
def skippable_read(*, reader: str, ref: str, route: str, step: str) -> None: ...
@message("W703", "`concurrency = {value}` is clamped to {limit}")
def concurrency_clamped(*, value: int, limit: int) -> None: ...
@message(
    "W704",
    "`# akmc: {kind}[…]` names {codes}, which is not a diagnostic code",
    "codes look like E203 or W700; `akmc explain CODE` describes each",
)
def unknown_suppressed_code(*, kind: str, codes: str) -> None: ...
@message(
    "W704",
    "`# akmc: ignore-file[{codes}]` silences nothing: this file has no such diagnostic",
    "remove the code from the suppression",
)
def idle_file_suppression(*, codes: str) -> None: ...
@message(
    "W704",
    "`# akmc: ignore[{codes}]` silences nothing on line {line}",
    "remove the suppression, or move it to the line the diagnostic points at",
)
def idle_suppression(*, codes: str, line: int) -> None: ...
@message(
    "W705",
    "step `{reader}` reads `{ref}`, but step `{step}` may fail and continue",
    "`on_error = continue` {source} makes its output null when it fails, and a path beneath null does not "
    "resolve; make step `{step}` `on_error = fail`, or read it where `T | null` is declared",
)
def continuing_read(*, reader: str, ref: str, step: str, source: str) -> None: ...
@message(
    "W706",
    "`limits {{ max_tokens }}` is set, but no agent unit can run in this workflow or its children",
    "only an agent reports token usage, so the budget can never bind; remove `max_tokens`, or add an `agent` step",
)
def tokens_without_agents() -> None: ...
@message(
    "W708",
    "this shell command runs workspace file `{path}`, which the plan does not freeze",
    'use `script "{path}"` instead: its bytes are frozen into the plan and hashed in its read set, so an edit '
    "changes the plan, its diff and its signature",
)
def shell_runs_workspace_file(*, path: str) -> None: ...


from akmc.messages_activity import *  # noqa: E402, F403  (stall, isolation and notify: imported last)
