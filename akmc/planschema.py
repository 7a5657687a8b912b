"""The published JSON Schema of the plan file format (`akmc schema`), built from the same description
of the definition (akm_run.planshape) as the runtime's strict decoder, so the two take every key,
bound and pattern from one place. The decoder checks more than a schema can say (references,
sorting, embedded hashes); the schema never refuses what the decoder accepts."""

from __future__ import annotations

from typing import Any

from akm_run import planformat as pf
from akm_run import planshape as shape
from akm_run.planformat import json_schema_pattern

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def plan_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan file."""
    description = shape.describe(pf.PlanFile)
    root = _record(description.records[description.root])
    definitions = {name: _record(record) for name, record in sorted(description.records.items()) if name != "PlanFile"}
    return {"$schema": DRAFT, "title": "akm plan file (irVersion 1)", **root, "$defs": definitions}


def _record(record: shape.Record) -> dict[str, Any]:
    properties = {key: _node(node) for key, node in {**record.required, **record.optional}.items()}
    return {
        "type": "object",
        "properties": properties,
        "required": list(record.required),
        "additionalProperties": False,
    }


def _node(node: shape.Node) -> dict[str, Any]:
    if isinstance(node, shape.Ref):
        return {"$ref": f"#/$defs/{node.name}"}
    if isinstance(node, shape.String):
        return (
            {"type": "string"}
            if node.pattern is None
            else {"type": "string", "pattern": json_schema_pattern(node.pattern)}
        )
    if isinstance(node, shape.Integer):
        return {"type": "integer", "minimum": node.low, "maximum": node.high}
    if isinstance(node, shape.Const):
        return {"const": node.value}
    if isinstance(node, shape.OneOf):
        return {"enum": list(node.values)}
    if isinstance(node, shape.Array):
        bounds = {"minItems": node.low} if node.low else {}
        bounds |= {"maxItems": node.high} if node.high < pf.MAX_INT else {}
        return {"type": "array", "items": _node(node.item), **bounds}
    if isinstance(node, shape.Mapping):
        pattern = json_schema_pattern(node.key)
        return {
            "type": "object",
            "patternProperties": {pattern: _node(node.item)},
            "additionalProperties": False,
            "maxProperties": node.high,
        }
    if isinstance(node, shape.Tagged):
        return {"oneOf": [_node(ref) for ref in node.variants.values()]}
    if isinstance(node, shape.Either):
        return {"oneOf": [_node(member) for member in node.members]}
    return {"type": "object"} if isinstance(node, shape.JsonSchema) else {}
