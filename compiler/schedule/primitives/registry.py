"""The primitive registry: one declaration per schedule primitive, written on the function that does the work.

A primitive module says what its primitive takes and returns with `@primitive(...)` (the shape of Exo's
`@sched_op`); the function keeps its plain form `fn(state, *arguments)` and is returned unchanged::

    @primitive(arg("loop", LOOP), arg("factor", INT, text="FACTOR", keyword=True), new_loops=True, rank=10)
    def split(state: State, loop: LoopLike, factor: int, names=None) -> tuple[str, str]:
        ...

Everything else is built from the declarations, with nothing written per primitive anywhere else:

* the table of primitives, `primitives()` (name -> `Primitive`, in `rank` order), where `.tdsl` schedule
  blocks and `Trace.replay` look names up (`compiler/schedule/schedule.py`);
* one `Schedule` method per primitive (`Primitive.method`): its real Python signature (`inspect.signature`,
  `help()`, IDEs), and as its docstring the primitive module's before/after docstring, the usage and the
  arguments;
* the usage text of errors (`Primitive.usage`: "wrong arguments; expected split(STMT.LOOP, FACTOR)") and the
  keywords a `.tdsl` step may write (`Primitive.keywords`);
* the call made of a method's arguments (`Primitive.call`), which is also what the trace records: arguments
  declared with `arg` print positionally, `option`s as `key=value` (an `option(..., omit_default=True)` only
  when it is not its default), so that the trace prints as `.tdsl` steps and replays;
* `Schedule.can(name, ...)`, the same call run on a trial state (`Primitive.bind` checks its arguments).

The modules of this package are imported when the table is first read, so a new primitive module is found
without being listed anywhere.  Declarations are checked against the function when they are made: the
declared parameters must be the function's, in its order, with its defaults.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import keyword
import pkgutil
from dataclasses import dataclass
from typing import Callable, Optional

from tdsl.compiler.errors import ScheduleError
from tdsl.frontend.limits import plain_int
from tdsl.frontend.ast import LoopRef

# ---------------------------------------------------------------- what an argument names


@dataclass(frozen=True)
class Kind:
    """What an argument names: how a usage text writes it, its Python type, and what it is, in words."""

    text: str
    annotation: str
    what: str


LOOP = Kind("STMT.LOOP", "str | LoopRef", "a loop: STMT.LOOP, or the name of a loop no other loop shares")
STMT = Kind("STMT", "str", "a statement, named by the tensor it writes")
TENSOR = Kind("TENSOR", "str", "a tensor of the kernel")
SCOPE = Kind("SCOPE", "str", "a memory scope (global, shared, register, local, L1, L0A, L0B, L0C, UB)")
AXIS = Kind("grid.x", "str", "a grid axis: grid.x, grid.y or grid.z")
DTYPE = Kind("DTYPE", "str | None", "an element type (bf16, f16, f32, f8e4m3)")
INT = Kind("N", "int", "a positive integer")
DIM = Kind("ITER", "str", "a dimension of the tensor, named by the iterator its statement writes it with")
OFFSET = Kind("N", "int", "an integer, negative or positive, not 0")
COUNT = Kind("N", "int | str", "a positive integer, or the name of a size")
FLAG = Kind("true", "bool", "true or false")
LOOPS_THEN_FACTORS = Kind("STMT.L1, ..., STMT.Ln, F1, ..., Fn", "str | LoopRef | int",
                          "loops of one statement, then one positive integer factor per loop")

NAMES_ANNOTATION = "str | Sequence[str] | None"


def _as_written(value, kind: Kind):
    """A loop reference (`Y.i` in a schedule block) given where the parameter is no loop, as the step wrote it:
    the primitive's check then names it so (`unknown memory scope 'Y.i'`), not as the parser's object.  An
    integer of another type (NumPy's `np.int64(4)` from the Python API) is the int it stands for."""
    if isinstance(value, LoopRef) and "LoopRef" not in kind.annotation:
        return value.text
    return _plain_int(value)


def _plain_int(value):
    if isinstance(value, (list, tuple)):
        return type(value)(_plain_int(v) for v in value)
    return plain_int(value)


# ---------------------------------------------------------------- the parameters of a primitive

_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One parameter of a primitive.  Made with `arg`, `rest` or `option`, not directly."""

    name: str
    kind: Kind
    form: str  # "arg" (positional in the trace), "rest" (*name), "option" (key=value in the trace)
    default: object = _REQUIRED
    text: Optional[str] = None  # how the usage writes it, when not the kind's text
    keyword: bool = False  # an "arg" that a .tdsl step may also write as NAME=value
    alias: Optional[str] = None  # an "arg" that may be given under this second name instead (exactly once)
    role: Optional[str] = None  # what it is, in words, when the kind does not say enough
    omit_default: bool = False  # an "option" the trace leaves out while it is its default

    @property
    def usage(self) -> str:
        return self.text or self.kind.text

    @property
    def what(self) -> str:
        return self.role or self.kind.what


def arg(name: str, kind: Kind, *, text: Optional[str] = None, keyword: bool = False, alias: Optional[str] = None,
        role: Optional[str] = None) -> Param:
    """A required argument, recorded positionally.  `keyword=True`: a `.tdsl` step may write `name=value`.
    `alias="at"`: the argument may be given as `at=` instead (in Python and in `.tdsl`), but exactly once;
    `role` then names it in the error ("name the target loop once")."""
    if alias is not None and role is None:
        raise ValueError(f"argument {name}: an alias needs a role, to say what must be named once")
    return Param(name, kind, "arg", text=text, keyword=keyword, alias=alias, role=role)


def rest(name: str, kind: Kind, *, text: Optional[str] = None, role: Optional[str] = None) -> Param:
    """Any number of positional arguments (`*name`), recorded positionally."""
    return Param(name, kind, "rest", text=text, role=role)


def option(name: str, kind: Kind, default, *, text: Optional[str] = None, omit_default: bool = False,
           role: Optional[str] = None) -> Param:
    """An argument with a default, recorded as `name=value` (a `.tdsl` step may write it so too); with
    `omit_default=True` only when the value is not the default itself (`is`), shown in the usage as
    `[, name=VALUE]`."""
    return Param(name, kind, "option", default=default, text=text, omit_default=omit_default, role=role)


# ---------------------------------------------------------------- one primitive


@dataclass(frozen=True)
class Primitive:
    """A declared primitive: its implementation `fn(state, *args, **kwargs)` and how it is called."""

    name: str
    fn: Callable
    params: tuple
    new_loops: bool  # it makes loops and returns their names; `names=` chooses them
    rank: int  # where it is listed among the primitives
    doc: str  # the contract: its module's before/after docstring

    # ------------------------------------------------------------ texts

    @property
    def usage(self) -> str:
        """`cache_read(TENSOR, SCOPE, at=STMT.LOOP[, dtype=DTYPE])`: the form of a `.tdsl` step."""
        text = ""
        for p in self.params:
            if p.form != "option":
                text += f", {p.usage}"
            elif p.omit_default:
                text += f"[, {p.name}={p.usage}]"
            else:
                text += f", {p.name}={p.usage}"
        if text.startswith(", "):
            text = text[2:]
        elif text.startswith("[, "):  # only optional arguments
            text = "[" + text[3:]
        return f"{self.name}({text})"

    @property
    def keywords(self) -> tuple[str, ...]:
        """The keywords a `.tdsl` step may write."""
        out = []
        for p in self.params:
            if p.form == "option" or p.keyword:
                out.append(p.name)
            if p.alias:
                out.append(p.alias)
        return tuple(out)

    @property
    def docstring(self) -> str:
        lines = [self.doc.strip(), "", f"Schedule step: ``{self.usage}``."]
        if self.new_loops:
            lines.append("Returns the names of the loops it makes; ``names=`` (a name or a list of names) chooses them.")
        lines += ["", "Arguments:"]
        width = max([len(p.name) for p in self.params] + [len(p.alias) for p in self.params if p.alias]
                    + [len("names")] * self.new_loops, default=0)
        for p in self.params:
            star = "*" if p.form == "rest" else ""
            note = ""
            if p.keyword:
                note = f" (a .tdsl step may write {p.name}=)"
            if p.form == "option":
                note = f" (default {p.default!r})"
            what = f"{p.role} ({p.kind.what})" if p.role and p.form == "arg" else p.what
            lines.append(f"    {star + p.name:<{width + 1}} {what}{note}")
            if p.alias:
                lines.append(f"    {p.alias:<{width + 1}} the same as {p.name}, written as a keyword: give one of them")
        if self.new_loops:
            lines.append(f"    {'names':<{width + 1}} the names of the new loops (default: made from the old names)")
        lines += ["",
                  "A step that raises leaves the schedule as it was: a ScheduleError for a misuse, a LegalityError",
                  "(one subclass per rule, with a counterexample) when the step would change the result.",
                  f"``Schedule.can({self.name!r}, ...)`` asks whether it would be accepted, without applying it."]
        return "\n".join(lines)

    # ------------------------------------------------------------ calls

    def signature(self, method: bool = False) -> inspect.Signature:
        """The Python signature of the `Schedule` method (`method=True`: with `self`)."""
        P = inspect.Parameter
        params = [P("self", P.POSITIONAL_OR_KEYWORD)] if method else []
        kind = P.POSITIONAL_OR_KEYWORD
        for p in self.params:
            if p.form == "rest":
                params.append(P(p.name, P.VAR_POSITIONAL, annotation=p.kind.annotation))
                kind = P.KEYWORD_ONLY
            elif p.form == "option":
                optional = p.default is None and "None" not in p.kind.annotation
                params.append(P(p.name, kind, default=p.default,
                                annotation=p.kind.annotation + " | None" * optional))
            elif p.alias:  # either one may name it: both default to None
                params.append(P(p.name, kind, default=None, annotation=f"{p.kind.annotation} | None"))
                params.append(P(p.alias, kind, default=None, annotation=f"{p.kind.annotation} | None"))
            else:
                params.append(P(p.name, kind, annotation=p.kind.annotation))
        if self.new_loops:
            # keyword only: a step's extra positional argument is a mistake, not the names of its loops
            params.append(P("names", P.KEYWORD_ONLY, default=None, annotation=NAMES_ANNOTATION))
        returns = self.fn.__annotations__.get("return", inspect.Signature.empty)
        return inspect.Signature(params, return_annotation=returns)

    def bind(self, args: tuple, kwargs: dict) -> dict:
        """The method's arguments by parameter name, defaults filled in; a TypeError if they do not fit."""
        bound = self.signature().bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def call(self, values: dict) -> tuple[tuple, dict]:
        """The implementation's arguments (after `state`) for the method's `values`, which the trace records too;
        `names` is not among them (the trace prints the loops made instead)."""
        args, kwargs = [], {}
        for p in self.params:
            value = _as_written(values[p.name], p.kind)
            if p.form == "rest":
                args.extend(value)
            elif p.form == "option":
                if not (p.omit_default and value is p.default):
                    kwargs[p.name] = value
            elif p.alias:
                other = values[p.alias]
                if (value is None) == (other is None):
                    raise ScheduleError(self.name, f"name {p.role} once: {self.usage}")
                args.append(value if value is not None else other)
            else:
                args.append(value)
        return tuple(args), kwargs

    def method(self) -> Callable:
        """The `Schedule` method: a real function with this primitive's signature (so that a call that does not
        fit fails as any Python call does), which hands its arguments to `Schedule._apply`."""
        sig = self.signature(method=True)
        source, star = [], False
        for p in sig.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                source.append(f"*{p.name}")
                star = True
                continue
            if p.kind is p.KEYWORD_ONLY and not star:
                source.append("*")
                star = True
            source.append(p.name if p.default is p.empty else f"{p.name}=_defaults[{p.name!r}]")
        values = ", ".join(f"{n!r}: {n}" for n in list(sig.parameters)[1:])
        code = f"def {self.name}({', '.join(source)}):\n    return self._apply(_primitive, {{{values}}})\n"
        namespace = {"_primitive": self, "_defaults": {p.name: p.default for p in sig.parameters.values()}}
        # The text is built from checked identifiers only (as dataclasses builds __init__); tracebacks name it.
        exec(compile(code, f"<Schedule.{self.name}, generated by compiler/schedule/primitives/registry.py>", "exec"), namespace)
        fn = namespace[self.name]
        fn.__qualname__ = f"Schedule.{self.name}"
        fn.__doc__ = self.docstring
        fn.__annotations__ = {p.name: p.annotation for p in list(sig.parameters.values())[1:]}
        if sig.return_annotation is not sig.empty:
            fn.__annotations__["return"] = sig.return_annotation
        fn.__primitive__ = self
        return fn


# ---------------------------------------------------------------- the declaration

_TABLE: dict[str, Primitive] = {}
_ORDERED: Optional[dict] = None
_HOOKS: list[Callable[[str, Optional[Primitive]], None]] = []
_LOADED = False
_RESERVED = {"self", "names", "_primitive", "_defaults"}


def primitive(*params: Param, new_loops: bool = False, rank: int, name: Optional[str] = None,
              doc: Optional[str] = None) -> Callable:
    """Declare the decorated function `fn(state, ...)` a schedule primitive named `name` (default: the function's
    name).  `params` are its arguments after `state` (`arg`, `rest`, `option`); `new_loops`: it makes loops and
    takes `names=` (the function must have that parameter); `rank`: its place in listings (the primitives an
    unknown name is told about); `doc`: its contract (default: the docstring of the function's module)."""

    def declare(fn: Callable) -> Callable:
        prim = Primitive(name or fn.__name__, fn, tuple(params), new_loops, rank,
                         doc if doc is not None else (inspect.getmodule(fn).__doc__ or ""))
        _check(prim)
        register(prim)
        return fn

    return declare


def register(prim: Primitive) -> None:
    """Add a primitive to the table (what `@primitive` does); `Schedule` gets its method at once."""
    global _ORDERED
    old = _TABLE.get(prim.name)
    if old is not None and _origin(old.fn) != _origin(prim.fn):
        raise ValueError(f"primitive {prim.name} is declared twice: {_origin(old.fn)} and {_origin(prim.fn)}")
    for other in _TABLE.values():
        if other.rank == prim.rank and other.name != prim.name:
            raise ValueError(f"primitives {other.name} and {prim.name} have the same rank {prim.rank}")
    _TABLE[prim.name] = prim
    _ORDERED = None
    try:
        for hook in _HOOKS:
            hook(prim.name, prim)
    except Exception:  # refused (its method would replace another attribute): the table stays as it was
        del _TABLE[prim.name]
        if old is not None:
            _TABLE[prim.name] = old
        raise


def unregister(name: str) -> Primitive:
    """Remove a primitive (and its `Schedule` method); for tests that declare one of their own."""
    global _ORDERED
    prim = _TABLE.pop(name)
    _ORDERED = None
    for hook in _HOOKS:
        hook(name, None)
    return prim


def on_change(hook: Callable[[str, Optional[Primitive]], None]) -> None:
    """Call `hook(name, primitive)` for every primitive now and for each one registered later, and
    `hook(name, None)` when one is removed (`compiler/schedule/schedule.py` keeps the `Schedule` methods this way)."""
    for prim in primitives().values():
        hook(prim.name, prim)
    _HOOKS.append(hook)


def primitives() -> dict[str, Primitive]:
    """Every primitive by name, in rank order (the modules of this package are imported first)."""
    global _ORDERED, _LOADED
    if not _LOADED:
        _LOADED = True
        for info in pkgutil.iter_modules(_package_path()):
            importlib.import_module(f"{__package__}.{info.name}")
    if _ORDERED is None:
        _ORDERED = {p.name: p for p in sorted(_TABLE.values(), key=lambda p: p.rank)}
    return _ORDERED


def unknown(name: str) -> str:
    """What to say about a name that is no primitive."""
    table = primitives()
    close = difflib.get_close_matches(name, table, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown primitive{hint}; primitives: {', '.join(table)}"


def _package_path() -> list[str]:
    return list(importlib.import_module(__package__).__path__)


def _origin(fn: Callable) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _check(prim: Primitive) -> None:
    """The declaration must describe the function: the same parameters after `state`, in order, with its
    defaults, and `names` exactly when it makes loops."""
    where = f"@primitive on {_origin(prim.fn)}"
    if not prim.name.isidentifier() or keyword.iskeyword(prim.name) or prim.name.startswith("_"):
        raise ValueError(f"{where}: {prim.name!r} cannot name a primitive")
    declared = []
    for p in prim.params:
        for n in filter(None, (p.name, p.alias)):
            if not n.isidentifier() or keyword.iskeyword(n) or n in _RESERVED:
                raise ValueError(f"{where}: {n!r} cannot name a parameter")
        declared.append((p.name, "rest" if p.form == "rest" else "one"))
    if prim.new_loops:
        declared.append(("names", "one"))
    params = list(inspect.signature(prim.fn).parameters.values())[1:]
    actual = [(q.name, "rest" if q.kind is q.VAR_POSITIONAL else "one") for q in params]
    if declared != actual:
        raise ValueError(f"{where}: declares parameters {declared} but the function takes {actual} after state")
    for p, q in zip(prim.params, params):
        if p.form == "option" and q.default is not q.empty and q.default != p.default:
            raise ValueError(f"{where}: {p.name} defaults to {p.default!r} here and to {q.default!r} in the function")
    prim.signature()  # a declaration Python cannot call (a required argument after an option) fails here
