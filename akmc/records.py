"""Record classes for the compiler's data: plain slotted classes that behave like
`@dataclass(slots=True)` ones (`frozen=True` too), without importing `dataclasses`.

A record has a positional and keyword `__init__` (defaults, and `field(default_factory=…)`),
field-wise `==` between records of one class, a `Name(field=value, …)` repr and `__match_args__`;
a mutable record is unhashable, a frozen one hashes its fields, refuses assignment and pickles through `__init__`. The methods
of every record class a module declares are generated in one compile by `build()`, which the module
calls once after its last record: `dataclasses` (with `inspect`) and one compile per method cost
every `akmc check` process that compiles a file about 15 ms of start-up."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

_Class = TypeVar("_Class", bound=type)
_FACTORY = object()  # the default of a field with a default factory
_pending: list[tuple[type, tuple[str, ...], dict[str, Any], bool]] = []


class FrozenError(AttributeError):
    """Assignment to a field of a frozen record (like `dataclasses.FrozenInstanceError`)."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made afresh for each record (like `dataclasses.field`)."""
    return _Factory(default_factory)


@overload
def record(cls: _Class, /) -> _Class: ...
@overload
def record(*, frozen: bool = False) -> Callable[[_Class], _Class]: ...


@dataclass_transform(field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """The class again with `__slots__` for its annotated fields; its methods come from `build()`."""

    def make(cls: type) -> type:
        # its own fields, in order (`inspect.get_annotations` would import what this module avoids)
        names = tuple(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063
        defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
        skip = {*names, "__dict__", "__weakref__"}
        namespace = {k: v for k, v in cls.__dict__.items() if k not in skip}
        namespace.update(__slots__=names, __match_args__=names)
        if not frozen:
            namespace["__hash__"] = None
        made = type(cls.__name__, cls.__bases__, namespace)
        made.__qualname__ = cls.__qualname__
        _pending.append((made, names, defaults, frozen))
        return made

    return make if cls is None else make(cls)


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A record's field values as a tuple, in field order."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        (name,) = names
        return lambda self: (getattr(self, name),)
    return lambda self: ()


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={value!r}" for name, value in zip(self.__slots__, self._values(self), strict=True))
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        return self._values(self) == other._values(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self._values(self))


def _setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenError(f"cannot delete field {name!r}")


def _reduce(self: Any) -> tuple[type, tuple[Any, ...]]:
    return (self.__class__, self._values(self))  # unpickling calls __init__, which may set fields


def build() -> None:
    """Attach the methods of every record class declared since the last call: one compile for all
    their `__init__`s (the parser creates nodes by the thousand), shared `__repr__`, `__eq__` and,
    frozen, `__hash__`, `__setattr__`, `__delattr__` and `__reduce__`."""
    lines: list[str] = []
    scope: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    for number, (_, names, defaults, frozen) in enumerate(_pending):
        params, body = ["self"], []
        for name in names:
            default = defaults.get(name)
            store = f"_set(self, {name!r}, {{}})" if frozen else f"self.{name} = {{}}"
            if name not in defaults:
                params.append(name)
                body.append("    " + store.format(name))
            elif isinstance(default, _Factory):
                scope[f"_make{number}_{name}"] = default.make
                params.append(f"{name}=_FACTORY")
                body.append("    " + store.format(f"_make{number}_{name}() if {name} is _FACTORY else {name}"))
            else:
                scope[f"_default{number}_{name}"] = default
                params.append(f"{name}=_default{number}_{name}")
                body.append("    " + store.format(name))
        lines += [f"def _init{number}({', '.join(params)}) -> None:", *(body or ["    pass"])]
    exec(compile("\n".join(lines), __name__ + ".build", "exec"), scope)  # our own generated code
    for number, (cls, names, _, frozen) in enumerate(_pending):
        init = scope[f"_init{number}"]
        init.__name__, init.__qualname__ = "__init__", f"{cls.__qualname__}.__init__"
        methods: dict[str, Any] = {"__init__": init, "__repr__": _repr, "__eq__": _eq}
        if frozen:
            methods.update(__hash__=_hash, __setattr__=_setattr, __delattr__=_delattr, __reduce__=_reduce)
        for method, function in methods.items():
            setattr(cls, method, function)
        type.__setattr__(cls, "_values", staticmethod(_values(names)))
    _pending.clear()
