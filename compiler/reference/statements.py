"""The statement compiler of the reference interpreter: each statement becomes one Python function over
numpy f32 scalars, `inst(p)`, that runs one instance.

`_Compiler` writes the function's source: index expressions as Python integer arithmetic (floor
semantics, bounds-checked against the tensor's shape), values as f32 arithmetic and calls into the runtime
(compiler/reference/runtime.py), and the store: a plain statement stores its value rounded to its dtype; a
reduction updates its accumulator (rounded to `accum_dtype`; per segment for `combine segments(N)`) and
stores it rounded after every update.  The function closes over the arrays of one run (`_State`, made by
`_init_state` from the inputs) and counts the instances of each element.  `compile_statements` compiles
every statement of a model against one state.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.model.dependences import segments
from tdsl.compiler.model.functions import COMPOSITIONS, PRIMITIVES
from tdsl.compiler.model.online import MAX, REF
from tdsl.compiler.model.storage import location, stored_shape
from tdsl.compiler.model.program import KernelModel, Stmt, Tensor
from tdsl.compiler.reference.order import _check_stmt
from tdsl.compiler.reference.runtime import Trace, _runtime_namespace
from tdsl.frontend import ast
from tdsl.compiler.model import reduce_ops

# A reduction's update `acc = acc (op) term`, by its combining operation (compiler/model/reduce_ops.py)
_COMBINE = {"+": "{0} + {1}", "max": "_fmax({0}, {1})", "min": "_fmin({0}, {1})"}

_UNARY_FUNCS = tuple(f for f, n in PRIMITIVES.items() if n == 1)
_BINARY_FUNCS = tuple(f for f, n in PRIMITIVES.items() if n == 2)
_TERNARY_FUNCS = tuple(f for f, n in PRIMITIVES.items() if n == 3)


def tensor_shape(t: Tensor) -> tuple[int, ...]:
    """The shape of `t` as ints; ValueError if a size is still symbolic."""
    out = []
    for k, s in enumerate(t.shape):
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise ValueError(
                f"tensor {t.name!r}: shape entry {k} is {s!r}, not an int "
                f"(bind every size before interpreting)"
            )
        if s < 0:
            raise ValueError(f"tensor {t.name!r}: negative shape entry {k}: {s}")
        out.append(int(s))
    return tuple(out)


class _Compiler:
    """Turns one statement into Python source for `def inst(p): ...`."""

    def __init__(self, model: KernelModel, stmt: Stmt, state: "_State", ns: dict, trace: bool,
                 lanes: Optional[int] = None):
        self.model = model
        self.lanes = lanes
        self.stmt = stmt
        self.state = state
        self.ns = ns
        self.trace = trace
        self.iter_pos = {name: k for k, name in enumerate(stmt.iters)}
        self.n_tmp = 0
        self.bound: dict[str, str] = {}  # names of a rescaling exponent -> the Python variables holding them

    def err(self, msg: str, node=None) -> ValueError:
        span = getattr(node, "span", None)
        where = f" (line {span.line}, column {span.column})" if span and span.line else ""
        return ValueError(f"statement {self.stmt.name!r}: {msg}{where}")

    def const(self, value, kind="c") -> str:
        # the namespace is shared by all statements of a run: number constants globally
        k = self.ns["__nconst__"] = self.ns.get("__nconst__", 0) + 1
        name = f"_{kind}{k}"
        assert name not in self.ns
        self.ns[name] = value
        return name

    def tmp(self) -> str:
        name = f"_a{self.n_tmp}"
        self.n_tmp += 1
        return name

    # ---------------------------------------------------------- index expressions
    def index(self, e) -> str:
        if isinstance(e, ast.IntLit):
            return repr(int(e.value))
        if isinstance(e, ast.Name):
            if e.name in self.iter_pos:
                return f"x{self.iter_pos[e.name]}"
            if e.name in self.model.sizes:
                v = self.model.sizes[e.name]
                if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                    raise self.err(f"size {e.name!r} = {v!r} is not a bound integer in an index", e)
                return repr(int(v))
            raise self.err(f"unknown name {e.name!r} in an index", e)
        if isinstance(e, ast.Neg):
            return f"(-{self.index(e.operand)})"
        if isinstance(e, ast.BinOp):
            if e.op not in ("+", "-", "*", "//", "%"):
                raise self.err(f"operator {e.op!r} in an index expression", e)
            return f"({self.index(e.lhs)} {e.op} {self.index(e.rhs)})"
        raise self.err(f"{type(e).__name__} in an index expression", e)

    # ---------------------------------------------------------- value expressions
    def value(self, e) -> str:
        if isinstance(e, (ast.IntLit, ast.FloatLit)):
            return self.const(np.float32(e.value))
        if isinstance(e, ast.Name):
            if e.name in self.bound:
                return self.bound[e.name]
            if e.name in self.iter_pos:
                return f"_f32(x{self.iter_pos[e.name]})"
            if e.name in self.model.sizes:
                v = self.model.sizes[e.name]
                if v is None or isinstance(v, bool) or not isinstance(v, numbers.Real):
                    raise self.err(f"size / constant {e.name!r} is not bound to a number ({v!r})", e)
                return self.const(np.float32(v))
            raise self.err(f"unknown name {e.name!r}", e)
        if isinstance(e, ast.Neg):
            return f"(-{self.value(e.operand)})"
        if isinstance(e, ast.BinOp):
            if e.op not in ("+", "-", "*", "/"):
                raise self.err(f"operator {e.op!r} is only allowed in index expressions", e)
            return f"({self.value(e.lhs)} {e.op} {self.value(e.rhs)})"
        if isinstance(e, ast.Access):
            return self.access(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.Compare):
            raise self.err("a comparison is only allowed as the condition of where()", e)
        if isinstance(e, ast.Reduce):
            raise self.err("a reduction inside a statement value (the model should have split it)", e)
        raise self.err(f"unknown expression node {type(e).__name__}", e)

    def compare(self, e) -> str:
        if not isinstance(e, ast.Compare):
            raise self.err("the condition of where() must be a comparison", e)
        if e.op not in ("<", "<=", ">", ">=", "==", "!="):
            raise self.err(f"unknown comparison {e.op!r}", e)
        return f"({self.value(e.lhs)} {e.op} {self.value(e.rhs)})"

    def call(self, e: ast.Call) -> str:
        f, args = e.func, e.args

        def arity(n):
            if len(args) != n:
                raise self.err(f"{f}() takes {n} argument(s), got {len(args)}", e)

        if f == "where":
            arity(3)
            c = self.compare(args[0])
            return f"({self.value(args[1])} if {c} else {self.value(args[2])})"
        if f in dt.NUMPY_DTYPES:
            arity(1)
            return f"_round_{f}({self.value(args[0])})"
        if f in _BINARY_FUNCS:
            arity(2)
            return f"_f{f}({self.value(args[0])}, {self.value(args[1])})"
        if f in _UNARY_FUNCS or f in COMPOSITIONS:
            arity(1)
            return f"_{f}({self.value(args[0])})"
        if f in _TERNARY_FUNCS:
            arity(3)
            return f"_{f}({', '.join(self.value(a) for a in args)})"
        raise self.err(f"unknown function {f!r}", e)

    def access(self, e: ast.Access) -> str:
        t = self.model.tensors.get(e.tensor)
        if t is None:
            raise self.err(f"read of unknown tensor {e.tensor!r}", e)
        shape = tensor_shape(t)
        if len(e.indices) != len(shape):
            raise self.err(
                f"{e.tensor} has {len(shape)} dimensions but is indexed with {len(e.indices)}", e
            )
        arr = self.state.values[e.tensor]
        arr_name = self.const(arr, "T")
        idx_src = [self.index(x) for x in e.indices]
        if not shape:
            key = "()"
            cond = "True"
        else:
            tmps = [self.tmp() for _ in shape]
            cond = " and ".join(
                f"0 <= ({tv} := {src}) < {n}" for tv, src, n in zip(tmps, idx_src, shape)
            )
            key = "(" + ", ".join(tmps) + ("," if len(tmps) == 1 else "") + ")"
        oob = self.const(
            (e.tensor, shape, e), "oob"
        )
        lam = "lambda: (" + ", ".join(idx_src) + ("," if len(idx_src) == 1 else "") + ")"
        where = _location(t, key, tmps if shape else [])
        if self.trace and t.kind != "input":
            cnt = self.const(self.state.counts[e.tensor], "C")
            exp = self.const(self.state.expected[e.tensor], "E")
            read = f"_traced_read({arr_name}, {cnt}, {exp}, {key}, {where}, {e.tensor!r}, {self.stmt.name!r}, p)"
        else:
            read = f"{arr_name}[{where}]"
        if cond != "True":
            read = f"({read} if ({cond}) else _oob({oob}, {lam}, p))"
        return f"_neg_inf_as_zero({read})" if e.neg_inf_as_zero else read

    # ---------------------------------------------------------- the statement
    def compile(self) -> Callable:
        stmt, model = self.stmt, self.model
        t = model.tensors.get(stmt.name)
        if t is None:
            raise self.err("writes a tensor that is not declared in the model")
        if t.kind == "input":
            raise self.err("writes an input tensor")
        shape = tensor_shape(t)
        if len(stmt.lhs_iters) != len(shape):
            raise self.err(
                f"{stmt.name} has {len(shape)} dimensions but {len(stmt.lhs_iters)} LHS iterators"
            )
        nlhs = len(stmt.lhs_iters)
        niters = len(stmt.iters)
        body = self.value(stmt.value)
        vals = self.const(self.state.values[stmt.name], "V")
        cnt = self.const(self.state.counts[stmt.name], "C")
        rst = self.const(dt.scalar_rounder(stmt.dtype), "r")
        rst_call = (lambda s: s) if stmt.dtype == "f32" else (lambda s: f"{rst}({s})")
        oob = self.const((stmt.name, shape, None), "oob")
        lines = ["def inst(p):"]
        if niters:
            lines.append(f"    {', '.join(f'x{k}' for k in range(niters))}{',' if niters == 1 else ''} = p")
        if nlhs:
            element = "(" + ", ".join(f"x{k}" for k in range(nlhs)) + ("," if nlhs == 1 else "") + ")"
            cond = " and ".join(f"0 <= x{k} < {n}" for k, n in enumerate(shape))
            lines.append(f"    if not ({cond}):")
            lines.append(f"        _oob({oob}, lambda: {element}, p)")
            lines.append(f"    at = {element}")  # the element's index, built once for every array it indexes
            key = "at"
            where = _location(t, key, [f"x{k}" for k in range(nlhs)])
        else:
            key = where = "()"
        lines.append(f"    v = {body}")
        if stmt.reduce_op is None:
            lines.append(f"    {vals}[{where}] = {rst_call('v')}")
            lines.append(f"    {cnt}[{key}] += 1")
        else:
            acc_dtype = stmt.accum_dtype or "f32"
            dt.numpy_dtype(acc_dtype)
            acc = self.const(self.state.accs[stmt.name], "A")
            racc = self.const(dt.scalar_rounder(acc_dtype), "r")
            racc_call = (lambda s: s) if acc_dtype == "f32" else (lambda s: f"{racc}({s})")
            init = self.const(np.float32(reduce_ops.identity(stmt.reduce_op)))
            spelling = _COMBINE[reduce_ops.combine(stmt.reduce_op)]
            combine = lambda x, y: spelling.format(x, y)  # noqa: E731
            seg = segments(stmt)
            if stmt.init is not None:  # evaluated once, at the element's first instance
                init = racc_call(self.value(stmt.init))
            lines.append(f"    n = {cnt}[{key}]")  # instances of this element before this one
            if self.lanes and self.tree_sum(seg):
                # a tile's lanes (`interpret(..., lanes=L)`): term n of the element into lane n % L, the element
                # the lanes added in pairs, as a kernel reduces a tile that walked the terms L at a time
                parts = self.const(np.zeros(self.state.accs[stmt.name].shape + (self.lanes,), np.float32), "L")
                lane = f"{parts}[{key} + (n % {self.lanes},)]"
                lines.append(f"    {lane} = {racc_call(combine(lane, 'v'))}")
                lines.append(f"    a = {self.const(_pairwise, 'f')}({parts}[{key}], {racc})")
                lines.append(f"    {acc}[{key}] = a")
            elif seg is None:
                lines.append(f"    a = {acc}[{key}] if n else {init}")
                if stmt.rescale is not None:
                    lines += self.rescale_lines(key, racc_call)
                lines.append(f"    a = {racc_call(combine('a', 'v'))}")
                lines.append(f"    {acc}[{key}] = a")
            else:
                # `combine segments(N)`: one accumulator per segment of the first reduction iterator, each
                # started from the identity; the element is the partial results folded in segment order.
                parts = self.const(self.state.seg_accs[stmt.name], "S")
                skey = "(" + ", ".join([f"x{k}" for k in range(nlhs)] + [f"x{seg.position} // {seg.length}"]) + ",)"
                lines.append(f"    {parts}[{skey}] = {racc_call(combine(f'{parts}[{skey}]', 'v'))}")
                lines.append(f"    a = {init}")
                lines.append(f"    for q in {parts}[{key}]:")
                lines.append(f"        a = {racc_call(combine('a', 'q'))}")
                lines.append(f"    {acc}[{key}] = a")
            lines.append(f"    {cnt}[{key}] = n + 1")
            lines.append(f"    {vals}[{key}] = {rst_call('a')}")
        src = "\n".join(lines) + "\n"
        code = compile(src, f"<tdsl stmt {stmt.name}>", "exec")
        exec(code, self.ns)
        fn = self.ns.pop("inst")
        fn.__tdsl_source__ = src
        return fn


    def tree_sum(self, seg) -> bool:
        """Whether a tree of lanes stands for another order of this statement's terms: a plain sum (no start
        value, no segments, no rescaling by a running maximum: those fix more of the order)."""
        stmt = self.stmt
        return (reduce_ops.combine(stmt.reduce_op) == "+" and seg is None and stmt.init is None
                and stmt.rescale is None)

    def rescale_lines(self, key: str, racc_call) -> list[str]:
        """A sum that follows a running maximum (`online`, compiler/model/online.py): before the update, an
        accumulator built with the maximum's value `ref` is multiplied by the program's exponential of ref and
        the current value, exp((ref - current)·c) as it is written (rounded to the accumulator), and then follows the current value.  Equal values (also two -inf) leave it as it is.
        The lines read `n`, the element's instances before this one, which `compile` has set."""
        rescale = self.stmt.rescale
        stat = self.state.values[rescale.stat]
        index = ", ".join(self.index(x) for x in rescale.index) + ("," if len(rescale.index) == 1 else "")
        refs = self.const(self.state.refs[self.stmt.name], "R")
        self.bound = {REF: f"{refs}[{key}]", MAX: "mc"}
        factor = self.value(rescale.factor)
        self.bound = {}
        return [
            f"    mc = {self.const(stat, 'T')}[({index})]",
            f"    if n and {refs}[{key}] != mc:",
            f"        a = {racc_call(f'a * {factor}')}",
            f"    {refs}[{key}] = mc",
        ]


def _location(t, key: str, coords: list[str]) -> str:
    """Where an element's value is stored: its index, folded along the dimensions `fold_storage` folds
    (compiler/model/storage.py)."""
    if not t.fold:
        return key
    parts = location(t, coords, "%")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


@dataclass
class _State:
    values: dict[str, np.ndarray]  # f32 value of every tensor element
    counts: dict[str, np.ndarray]  # instances executed per element (written tensors)
    accs: dict[str, np.ndarray]  # reduction accumulators (f32 arrays holding accum-dtype values)
    expected: dict[str, np.ndarray]
    seg_accs: dict[str, np.ndarray] = field(default_factory=dict)  # `combine segments(N)`: [element..., segment]
    refs: dict[str, np.ndarray] = field(default_factory=dict)  # a rescaled sum: the maximum it was built with


def _init_state(model: KernelModel, inputs: dict[str, np.ndarray]) -> _State:
    values, counts, accs = {}, {}, {}
    unknown = set(inputs) - set(model.tensors)
    if unknown:
        raise ValueError(f"inputs for unknown tensors: {sorted(unknown)}")
    for name, t in model.tensors.items():
        shape = tensor_shape(t)
        dt.numpy_dtype(t.dtype)
        if t.kind == "input" and name not in inputs:
            raise ValueError(f"missing input tensor {name!r}")
        if t.kind == "temp" and name in inputs:
            raise ValueError(f"{name!r} is a temporary of the kernel: it has no contents before the kernel runs")
        if name in inputs:  # an input, or an output's first contents (`program_order_inputs`)
            arr = np.asarray(inputs[name])
            if arr.shape != shape:
                raise ValueError(f"{t.kind} {name!r} has shape {arr.shape}, expected {shape}")
            values[name] = np.array(dt.round_to(t.dtype, arr), dtype=np.float32, copy=True)
        else:
            values[name] = np.full(tuple(stored_shape(t)), np.nan, dtype=np.float32)  # folded: fewer planes
        if t.kind != "input":
            counts[name] = np.zeros(shape, dtype=np.int64)
    for name, t in model.tensors.items():
        if t.stored_in:  # `store_in`: the output's elements are written over the input's (a read after shows it)
            values[name] = values[t.stored_in]
    seg_accs = {}
    for stmt in model.stmts:
        if stmt.reduce_op is not None and stmt.name in values:
            accs[stmt.name] = np.zeros(values[stmt.name].shape, dtype=np.float32)
            seg = segments(stmt)
            if seg is not None:
                identity = reduce_ops.identity(stmt.reduce_op)
                shape = values[stmt.name].shape + (seg.count,)
                seg_accs[stmt.name] = np.full(shape, identity, dtype=np.float32)
    expected = {name: np.zeros_like(c) for name, c in counts.items()}
    refs = {s.name: np.full(values[s.name].shape, np.nan, dtype=np.float32)
            for s in model.stmts if s.rescale is not None and s.name in values}
    return _State(values, counts, accs, expected, seg_accs, refs)


def compile_statements(model: KernelModel, state: _State, trace: Optional[Trace] = None,
                       variant: Optional[int] = None, lanes: Optional[int] = None) -> dict[str, Callable]:
    ns = _runtime_namespace(trace, variant)
    fns = {}
    for stmt in model.stmts:
        _check_stmt(stmt)
        fns[stmt.name] = _Compiler(model, stmt, state, ns, trace is not None, lanes).compile()
    return fns


def _pairwise(lanes: np.ndarray, rounded) -> np.float32:
    """A power-of-two row of lanes added as a tile reduction adds them: neighbours in pairs, then the pairs'
    sums in pairs, each sum rounded to the accumulator (`rounded`)."""
    row = list(lanes)
    while len(row) > 1:
        row = [rounded(row[k] + row[k + 1]) for k in range(0, len(row), 2)]
    return row[0]
