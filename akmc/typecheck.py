"""Types of params, step outputs and references: E300–E305 and the warnings W700–W702."""

from __future__ import annotations

from collections.abc import Mapping

from akmc import ast, messages
from akmc import types as t
from akmc.compose import Child
from akmc.diagnostics import Report, did_you_mean
from akmc.records import build, field, record
from akmc.resolve import Model, StepModel
from akmc.spans import keyword
from akmc.validation import validation_errors


@record
class Typed:
    """The types the checker settled on, for lowering and for composing parents."""

    params: dict[str, t.Type] = field(default_factory=dict)
    steps: dict[str, t.Type] = field(default_factory=dict)
    declared: dict[str, t.Type] = field(default_factory=dict)  # declared `output:` types
    outputs: dict[str, t.Type] = field(default_factory=dict)  # declared output types, else source types
    output_declared: dict[str, t.Type] = field(default_factory=dict)
    children: Mapping[str, Child] = field(default_factory=dict)  # `uses` step id → its compiled child


build()


def typecheck(model: Model, report: Report, children: Mapping[str, Child] | None = None) -> Typed:
    """Type every declaration and reference of a resolved workflow.

    `children` maps the id of each `uses` step whose child was found to that compiled child."""
    typed = Typed(children=children or {})
    _params(model, typed, report)
    for sm in model.steps:
        typed.steps[sm.id] = _step_type(sm, typed, report)
    used: set[str] = set()
    _exclusive(model, typed, report, used)
    skippable = _skippable(model)
    continuing = _continuing(model, skippable)
    nullable = _why_null(skippable, continuing)
    for sm in model.steps:
        if sm.kind == "parallel":  # `{member: T}`, T | null for a member that may not have an output
            fields = (
                t.Field(m, t.or_null(typed.steps[m]) if m in nullable else typed.steps[m], True) for m in sm.members
            )
            typed.steps[sm.id] = t.ObjT(tuple(fields))
    for sm in model.steps:
        for reference in sm.inputs:
            type_of(reference, model, typed, report, used)
        item: t.Type | None = None
        if sm.map is not None:
            over = type_of(sm.map.over, model, typed, report, used)
            if over is not None and not t.is_list(over):
                report.add(messages.map_over_non_list(ref=sm.map.over.text, type=t.describe(over)), sm.map.over.span)
            item = t.element(over) if over is not None and t.is_list(over) else None
        if sm.route is not None:
            _route(sm, model, typed, report, used)
        if sm.target is not None and sm.target.kind == "uses":
            _bindings(sm, model, typed, report, used, item, nullable)
    for name, output in model.outputs.items():
        source = _nullable(type_of(output.source, model, typed, report, used), output.source, nullable)
        if output.type is not None:
            declared = t.from_ast(output.type, report)
            typed.output_declared[name] = declared
            typed.outputs[name] = declared
            if source is not None and not t.fits(source, declared):
                report.add(
                    messages.output_mismatch(
                        name=name, declared=t.describe(declared), ref=output.source.text, actual=t.describe(source)
                    ),
                    output.source.span,
                    help=_null_help(output.source, nullable, f"declare it as `{t.describe(declared)} | null`"),
                )
        else:
            typed.outputs[name] = source if source is not None else t.ANY
    unknown = [r.name.text for r, _, _ in model.references if r.root == "params" and r.name.text not in model.params]
    for name, param in model.params.items():
        # a param that an unknown reference was probably meant to name is not reported twice
        if name not in used and not any(did_you_mean(u, [name]) for u in unknown):
            report.add(messages.unused_param(param=name), param.name.span)
    _nullable_reads(model, report, skippable, continuing)
    return typed


def _params(model: Model, typed: Typed, report: Report) -> None:
    """Type each param, and check its default against its type."""
    for name, param in model.params.items():
        typed.params[name] = t.from_ast(param.type, report)
        if param.default is not None and not t.reported(param.default):
            problems = validation_errors(t.value_of(param.default), typed.params[name])
            if problems:
                described = t.describe(typed.params[name])
                message = messages.default_mismatch(name=name, type=described, problem=problems[0])
                report.add(message, param.default.span)


def _exclusive(model: Model, typed: Typed, report: Report, used: set[str]) -> None:
    """`exclusive = params.NAME` tells runs apart by the param's value: a scalar (E207 otherwise)."""
    reference = model.exclusive
    if not isinstance(reference, ast.Reference):
        return
    param = type_of(reference, model, typed, report, used)
    if param is not None and not t.is_scalar(param):
        message = messages.exclusive_not_scalar(param=reference.name.text, type=t.describe(param))
        report.add(message, reference.span)


def _step_type(sm: StepModel, typed: Typed, report: Report) -> t.Type:
    if sm.output is not None:
        declared = t.from_ast(sm.output, report)
        typed.declared[sm.id] = declared
        if sm.kind == "map" and not t.fits(t.ListT(t.ANY), declared):  # the runtime checks the list against it
            message = messages.map_output_not_list(step=sm.id, declared=t.describe(declared))
            report.add(message, sm.output.span, help=f"declare the list: `list[{t.describe(declared)}]`")
        if not (sm.target is not None and sm.target.kind == "uses"):
            return _keeps_going(sm, declared)
    if sm.kind == "map":
        child = typed.children.get(sm.id) if sm.target is not None and sm.target.kind == "uses" else None
        return _keeps_going(sm, t.ListT(child.output_type if child is not None else t.ANY))  # a child run per item
    if sm.kind == "route":
        return t.STRING
    if sm.target is not None and sm.target.kind == "approval":
        return t.APPROVAL_OUTPUT
    if sm.target is not None and sm.target.kind == "uses" and sm.id in typed.children:
        return typed.children[sm.id].output_type
    return t.ANY


def _keeps_going(sm: StepModel, type_: t.Type) -> t.Type:
    """A map under `fail_fast = false` and `on_error = continue` reads as `list[T | null]`: every item
    ran, and a failed one's place holds null (operations.md D3.3)."""
    if sm.kind != "map" or sm.fail_fast or sm.on_error != "continue" or not t.is_list(type_):
        return type_
    return t.ListT(t.or_null(t.element(type_)))


def _skippable(model: Model) -> dict[str, str]:
    """Step id → the route step that may skip it."""
    skippable: dict[str, str] = {}
    for sm in model.steps:
        if sm.route is not None:
            for case in sm.route.cases:
                if model.index.get(case.target.text, -1) > sm.index:
                    skippable.setdefault(case.target.text, sm.id)
                    for member in model.steps[model.index[case.target.text]].members:  # a block's are skipped too
                        skippable.setdefault(member, sm.id)
    return skippable


def _continuing(model: Model, skippable: dict[str, str]) -> dict[str, str]:
    """Step id → where the `on_error = continue` of a step that may fail and continue comes from.

    An approval under `continue` completes with its decision when rejected, so it never reads as null.
    Neither does a map that keeps going, unless its subject reads a step that may be null: a map whose
    subject does not resolve fails before any item runs, and continues as null."""
    continuing: dict[str, str] = {}
    for sm in model.steps:
        if sm.on_error != "continue" or (sm.target is not None and sm.target.kind == "approval"):
            continue
        if sm.kind == "map" and not sm.fail_fast and sm.map is not None:
            subject = sm.map.over
            if subject.root != "steps" or (subject.name.text not in continuing and subject.name.text not in skippable):
                continue  # every item ran: its partial list is stored, never null as a whole (D3.3)
        items = [*sm.step.items, *(sm.map.items if sm.map is not None else [])]
        own = any(isinstance(i, ast.Setting) and i.name.text == "on_error" for i in items)
        continuing[sm.id] = f"on step `{sm.id}`" if own else "from `defaults`"
        for member in sm.members:  # a block that fails and continues leaves its failed members null
            continuing.setdefault(member, f"on its `parallel` block `{sm.id}`")
    return continuing


def _why_null(skippable: dict[str, str], continuing: dict[str, str]) -> dict[str, str]:
    """Step id → why its output may be null where it is read (a route's skip is named first)."""
    why = {
        step: f"step `{step}` has `on_error = continue`{'' if source.startswith('on step') else ' ' + source}, "
        "so its output is null when it fails"
        for step, source in continuing.items()
    }
    why.update(
        (step, f"route step `{route}` may skip step `{step}`, whose output is then null")
        for step, route in skippable.items()
    )
    return why


def _nullable(type_: t.Type | None, reference: ast.Reference, nullable: dict[str, str]) -> t.Type | None:
    """A reference's type where it is read: `T | null` when a route may skip the step it reads, or
    the step may fail and continue."""
    if type_ is None or reference.root != "steps" or reference.name.text not in nullable:
        return type_
    return t.or_null(type_)


def _null_help(reference: ast.Reference, nullable: dict[str, str], fix: str) -> str | None:
    why = nullable.get(reference.name.text) if reference.root == "steps" else None
    return None if why is None else f"{why}; {fix}"


def _bindings(
    sm: StepModel,
    model: Model,
    typed: Typed,
    report: Report,
    used: set[str],
    item: t.Type | None,
    nullable: dict[str, str],
) -> None:
    """Each binding against the child's params (E405, E300, E307), then every required param bound (E406).

    `item` is the type of the element a `map` block maps over (None outside a map)."""
    assert sm.target is not None and sm.target.path is not None
    child = typed.children.get(sm.id)
    known = child is not None and child.ok
    bound: set[str] = set()
    for binding in sm.target.bindings or []:
        name = binding.name.text
        value_type = None
        if isinstance(binding.value, ast.Reference):
            value_type = type_of(binding.value, model, typed, report, used, item)
            value_type = _nullable(value_type, binding.value, nullable)
        if child is None or not known:
            continue
        bound.add(name)
        if name not in child.params:
            names = ", ".join(f"`{p}`" for p in child.params) or "none"
            report.add(
                messages.unknown_child_param(child=child.ref, name=name),
                binding.name.span,
                help=did_you_mean(name, list(child.params)) or f"its params: {names}",
            )
            continue
        param_type = child.params[name][0]
        if isinstance(binding.value, ast.Reference):
            if value_type is not None and not t.fits(value_type, param_type):
                report.add(
                    messages.binding_type(
                        name=name,
                        value=binding.value.text,
                        value_type=t.describe(value_type),
                        child=child.ref,
                        param_type=t.describe(param_type),
                    ),
                    binding.value.span,
                    help=_null_help(binding.value, nullable, "give the child param a type that admits null"),
                )
        elif not t.reported(binding.value):
            problems = validation_errors(t.value_of(binding.value), param_type)
            if problems:
                message = messages.binding_mismatch(
                    name=name, child=child.ref, type=t.describe(param_type), problem=problems[0]
                )
                report.add(message, binding.value.span)
    if child is None or not known:
        return
    missing = [name for name, (_, required) in child.params.items() if required and name not in bound]
    for name in missing:
        described = t.describe(child.params[name][0])
        report.add(messages.unbound_param(step=sm.id, child=child.ref, name=name, type=described), sm.target.path.span)


def type_of(
    reference: ast.Reference,
    model: Model,
    typed: Typed,
    report: Report,
    used: set[str] | None = None,
    item: t.Type | None = None,
) -> t.Type | None:
    """The type a reference reads, or None when it is broken (already reported).

    `item` is the element type of the enclosing `map` (None where `item` is not defined: E209)."""
    name = reference.name.text
    if reference.root == "params":
        if used is not None:
            used.add(name)
        return typed.params.get(name)
    if reference.root == "item":
        current: t.Type | None = item
    else:
        index = model.index.get(name)
        if index is None or name not in typed.steps:
            return None
        current = typed.steps[name]
        child = typed.children.get(name)
        # the child's output is the step's (`.name`), or each item's of a map over `uses` (`[i].name`)
        at = 1 if model.steps[index].kind == "map" else 0
        segments = reference.segments
        if child is not None and child.ok and len(segments) > at and segments[at].field is not None:
            first = segments[at]
            if (at == 0 or segments[0].index is not None) and first.field not in child.exports:
                _not_exported(name, reference, first, child, report)
                return None
    text = reference.text  # once: a long path must not cost quadratic time
    for segment in reference.segments:
        if current is None:
            return None
        current = t.step_into(current, segment, text, report)
    return current


def _not_exported(step: str, reference: ast.Reference, first: ast.Segment, child: Child, report: Report) -> None:
    """E407, in the message shape of the language reference."""
    assert first.field is not None
    if child.outputs:
        outputs = ", ".join(child.outputs)
        message = messages.not_exported(step=step, ref=reference.text, child=child.ref, outputs=outputs)
    else:
        message = messages.no_outputs_exported(step=step, ref=reference.text, child=child.ref)
    report.add(message, first.span, help=did_you_mean(first.field, child.exports))


def _route(sm: StepModel, model: Model, typed: Typed, report: Report, used: set[str]) -> None:
    assert sm.route is not None
    subject = type_of(sm.route.subject, model, typed, report, used)
    if subject is None:
        return
    admits = t.Members(subject)  # indexed once: a check per case must not scan every member
    covered: set[tuple[str, object]] = set()  # by `literal_key`: `1` and `1.0` one case, `true` another
    for case in sm.route.cases:
        if case.match is None:
            continue
        literal = t.Lit(case.match.value)
        if not admits.admit(literal):
            message = messages.case_never_matches(
                case=t.describe(literal), ref=sm.route.subject.text, type=t.describe(subject)
            )
            report.add(message, case.match.span)
        covered.add(t.literal_key(literal.value))
    if any(case.match is None for case in sm.route.cases):
        return
    finite = t.literals(subject)
    if finite is not None:
        missing = [lit for lit in finite if t.literal_key(lit.value) not in covered]
        if missing:
            described = ", ".join(t.describe(m) for m in missing)
            message = messages.route_not_covered(ref=sm.route.subject.text, missing=described)
            report.add(message, keyword(sm.route.span, "route"))


def _nullable_reads(model: Model, report: Report, skippable: dict[str, str], continuing: dict[str, str]) -> None:
    """W702 and W705 where `inputs`, a `map` subject or a `route` subject reads a step that may not
    have run or may have failed: its output may be null there."""
    readers: list[tuple[str, ast.Reference]] = [(sm.id, r) for sm in model.steps for r in sm.inputs]
    readers += [(sm.id, sm.map.over) for sm in model.steps if sm.map is not None]
    readers += [(sm.id, sm.route.subject) for sm in model.steps if sm.route is not None]
    for reader, reference in readers:
        name = reference.name.text
        if reference.root != "steps" or name == reader:
            continue
        if name in skippable:
            message = messages.skippable_read(reader=reader, ref=reference.text, route=skippable[name], step=name)
            report.add(message, reference.name.span)
        if name in continuing:
            message = messages.continuing_read(reader=reader, ref=reference.text, step=name, source=continuing[name])
            report.add(message, reference.name.span)
