"""What a unit's process produced, read as the End the journal keeps (runtime.md, "The unit
process contract"): its bytes as text, the output rules (the size limit, strict JSON, the declared
type), secret values redacted, and nothing a store cannot hold."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from akm_run import strictjson
from akm_run.core import End
from akm_run.schemas import schema_errors

MAX_OUTPUT_BYTES = 1024 * 1024
STDERR_TAIL_BYTES = 64 * 1024
REFUSED_SHOWN_BYTES = 200  # how much of a refused stdout its output_invalid message shows
MIN_REDACTED = 4  # shorter secret values are not redacted: masking "a" everywhere would garble every output
REDACTED = "***"


def redact(value: Any, secrets: list[str]) -> Any:
    """`value` with every secret value (of at least MIN_REDACTED characters) replaced by ***."""
    masks = sorted({s for s in secrets if len(s) >= MIN_REDACTED}, key=len, reverse=True)
    if not masks:
        return value
    if isinstance(value, str):
        for mask in masks:
            value = value.replace(mask, REDACTED)
        return value
    if isinstance(value, list):
        return [redact(v, masks) for v in value]
    if isinstance(value, dict):
        return {redact(k, masks): redact(v, masks) for k, v in value.items()}
    return value


def text(data: bytes) -> str:
    """A unit's bytes as the journal keeps them, alike on both stores: what is not UTF-8, and NUL
    (which PostgreSQL's text cannot hold), as U+FFFD. A NUL escaped inside JSON stays itself."""
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd")


def clean(data: bytes, secrets: list[str]) -> str:
    return str(redact(text(data), secrets))


def first(text: str, limit: int) -> str:
    """The beginning of `text`, at most `limit` bytes of UTF-8 (never half a character)."""
    return text.encode()[:limit].decode("utf-8", "ignore")


def last(text: str, limit: int) -> str:
    """The end of `text`, at most `limit` bytes of UTF-8 (never half a character)."""
    return text.encode()[-limit:].decode("utf-8", "ignore") if limit else ""


def read(
    stdout: bytes,
    size: int,
    what: str,
    output_schema: Any,
    tail: str | None,
    clean: Callable[[bytes], str],
) -> End:
    """The End of a unit that exited 0, from its stdout (the first bytes of `size` it wrote): its
    output, or output_too_large or output_invalid. `what` names the unit in a message."""
    if size > MAX_OUTPUT_BYTES:
        return End(
            "failed",
            reason="output_too_large",
            message=f"{what} wrote {size} bytes to stdout; the limit is {MAX_OUTPUT_BYTES}",
            stderr_tail=tail,
        )

    def invalid(why: str) -> End:
        began = json.dumps(first(clean(stdout), REFUSED_SHOWN_BYTES), ensure_ascii=False)
        return End(
            "failed",
            reason="output_invalid",
            message=f"{what} {why}; its stdout began {began}",
            stderr_tail=tail,
        )

    decoded = text(stdout)
    try:
        value: Any = strictjson.loads(decoded)
        parsed = True
    except strictjson.NotStrict as error:
        return invalid(f"printed JSON that is not strict JSON: {error}")
    except ValueError:
        value, parsed = (decoded[:-1] if decoded.endswith("\n") else decoded), False
    if output_schema is not None:
        if not parsed:
            return invalid("declares an output type, but stdout is not JSON")
        problems = schema_errors(value, output_schema)
        if problems:
            return invalid(f"output does not match its type: {first(problems[0], REFUSED_SHOWN_BYTES)}")
    return End("completed", output=value, stderr_tail=tail)


def storable(outcome: End) -> End:
    """`outcome` as every store can hold it: no message or tail holds a lone surrogate, and an
    output that would (strict JSON refuses them; nothing else may slip through) is output_invalid."""
    outcome.message = outcome.message and _unicode(outcome.message)
    outcome.stderr_tail = outcome.stderr_tail and _unicode(outcome.stderr_tail)
    try:
        strictjson.dumps(outcome.output).encode()
    except (UnicodeEncodeError, ValueError) as error:
        return End(
            "failed",
            reason="output_invalid",
            message=f"the output cannot be stored: {_unicode(str(error))}",
            stderr_tail=outcome.stderr_tail,
        )
    return outcome


def _unicode(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode()


def redacted(outcome: End, secrets: list[str]) -> End:
    if not secrets:
        return outcome
    outcome.output = redact(outcome.output, secrets)
    outcome.message = redact(outcome.message, secrets)
    outcome.stderr_tail = redact(outcome.stderr_tail, secrets)
    return outcome
