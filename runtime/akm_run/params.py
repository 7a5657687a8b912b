"""Run params: `--param K=V` parsed by the declared type, `--params-file`, defaults, validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from akm_run import strictjson, wording
from akm_run.schemas import schema_errors
from akm_run.signing import read_limited

MAX_PARAMS_FILE_BYTES = 1024 * 1024  # a params file is read whole, never past this (docs/runtime.md)


class ParamsError(Exception):
    """Params that do not fit the plan; nothing is published (exit 2)."""


def parse_value(raw: str, schema: dict[str, Any]) -> Any:
    """A command-line value by the param's declared type: strings as given, `int`, `number` and `bool`
    parsed, anything else (lists, objects, unions) as JSON."""
    kinds = _kinds(schema)
    if kinds == {"string"}:
        return raw
    if kinds <= {"integer", "number"} and kinds:
        wanted = "an int" if kinds == {"integer"} else "a number"
        try:
            number = strictjson.loads(raw.strip())
        except strictjson.NotStrict as error:
            raise ParamsError(wording.param_value_not_strict(wanted=wanted, raw=raw, error=error)) from None
        except ValueError:
            raise ParamsError(wording.param_value(wanted=wanted, raw=raw)) from None
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ParamsError(wording.param_value(wanted=wanted, raw=raw))
        if kinds == {"integer"} and not isinstance(number, int):
            raise ParamsError(wording.param_value(wanted="an int", raw=raw))
        return number
    if kinds == {"boolean"}:
        if raw in ("true", "false"):
            return raw == "true"
        raise ParamsError(wording.param_value(wanted="true or false", raw=raw))
    try:
        return strictjson.loads(raw)
    except strictjson.NotStrict as error:
        raise ParamsError(wording.param_not_strict_json(raw=raw[:40], error=error)) from None
    except ValueError:
        if "string" in kinds or not kinds:
            return raw
        raise ParamsError(wording.param_value(wanted="JSON", raw=raw)) from None


def _kinds(schema: dict[str, Any]) -> set[str]:
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {"string"} if all(isinstance(v, str) for v in values) else set()
    if "anyOf" in schema:
        found: set[str] = set()
        for member in schema["anyOf"]:
            found |= _kinds(member) or {"json"}
        return found
    kind = schema.get("type")
    return {kind} if isinstance(kind, str) else set()


def collect(declared: dict[str, Any], pairs: list[str], params_file: Path | None) -> dict[str, Any]:
    """The run's params: the file, then `--param` pairs (which win), then defaults; all validated."""
    given: dict[str, Any] = {}
    if params_file is not None:
        try:
            loaded = strictjson.loads(read_limited(params_file, MAX_PARAMS_FILE_BYTES).decode("utf-8"))
        except OSError as error:
            raise ParamsError(wording.unreadable_params_file(path=params_file, why=error.strerror or error)) from None
        except ValueError as error:  # not regular, too large, not UTF-8, not strict JSON
            raise ParamsError(wording.unreadable_params_file(path=params_file, why=error)) from None
        if not isinstance(loaded, dict):
            raise ParamsError(wording.params_file_not_object(path=params_file))
        given.update(loaded)
    for pair in pairs:
        name, equals, raw = pair.partition("=")
        if not equals:
            raise ParamsError(wording.param_pair(pair=pair))
        if name not in declared:
            raise ParamsError(_unknown(name, declared))
        try:
            given[name] = parse_value(raw, declared[name]["schema"])
        except ParamsError as error:
            raise ParamsError(wording.param_problem(name=name, problem=error)) from None
    return complete(declared, given)


def complete(declared: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """`given` with defaults applied, validated against each param's schema; raises ParamsError."""
    problems = [_unknown(name, declared) for name in given if name not in declared]
    params = {}
    for name, param in declared.items():
        if name in given:
            params[name] = given[name]
        elif "default" in param:
            params[name] = param["default"]
        else:
            problems.append(wording.param_required(name=name))
            continue
        problems += [wording.param_problem(name=name, problem=p) for p in schema_errors(params[name], param["schema"])]
    if problems:
        raise ParamsError("; ".join(problems))
    return params


def _unknown(name: str, declared: dict[str, Any]) -> str:
    return wording.unknown_param(name=name, known=", ".join(declared) or "none")
