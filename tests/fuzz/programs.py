"""Programs for the fuzzer: the chapter's examples, and small random kernels built from the shapes they use.

A random kernel works on three iteration spaces -- MN (i, j), MK (i, k), KN (k, j) -- and their 1-D edges
(M by i, N by j, K by k).  Statements are elementwise maps in one space, reductions of a 2-D space to one of
its edges (`sum`/`max`/`min`, optionally over a triangle `j <= i`, a sum sometimes from a start value, with an
accumulator dtype and a combine policy),
matrix products MK x KN -> MN, recurrences (a statement reading its own earlier elements), time loops (a `for`
block of two statements, each step reading the last step's values and its neighbours), maps whose value is an
integer of the iterators chosen by data, and maps on the edges.  Every read is in bounds and every iterator is indexed
plainly somewhere, so every generated program passes the frontend's checks; the last one or two statements
become the kernel's results, sometimes kept in an input's array (`-> (Y: f32[M, N] in XMN)`, where the program
order allows it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The files a sequence may start from, by library: the chapter's examples, the PolyBench ports (time loops,
# recurrences, in-place results) and the benchmark programs (the GPU workloads' hand-written schedules).
LIBRARIES = {
    "examples": EXAMPLES,
    "polybench": ROOT / "benchmarks" / "polybench",
    "programs": ROOT / "benchmarks" / "programs",
}

SPACES = {"MN": (("i", "M"), ("j", "N")), "MK": (("i", "M"), ("k", "K")), "KN": (("k", "K"), ("j", "N"))}
EDGES = {"M": "i", "N": "j", "K": "k"}
DTYPES = ("bf16", "bf16", "f16", "f32", "f32", "f8e4m3")
UNARY = ("exp", "silu", "sigmoid", "tanh", "abs", "neg", "bf16", "f16", "f8e4m3", "sqrtabs", "rsqrt1", "square",
         "fast_silu", "fast_sigmoid", "inverse1", "exp2", "fma1")


@lru_cache(maxsize=None)
def library_sources(library: str) -> tuple:
    """(name, text) of every .tdsl file of one library, in a fixed order."""
    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r} (known: {', '.join(LIBRARIES)})")
    return tuple((p.stem, p.read_text(encoding="utf-8")) for p in sorted(LIBRARIES[library].rglob("*.tdsl")))


@dataclass
class _Tensor:
    name: str
    space: str  # MN | MK | KN | M | N | K
    dtype: str
    triangle: bool = False  # defined only where j <= i (MN space)
    is_input: bool = False


@dataclass
class _Stmt:
    target: str
    space: str
    text: str  # the right-hand side, and anything after the left-hand indices
    dtype: str
    triangle: bool = False
    lhs: Optional[list] = None  # left-hand iterators (default: the space's)
    block: Optional[str] = None  # a loop block `for t < T`: the statement's iterator t comes first


@dataclass
class _Builder:
    rng: random.Random
    tensors: list = field(default_factory=list)
    stmts: list = field(default_factory=list)
    counter: int = 0
    steps: bool = False  # a time loop uses the size T

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def values(self, space: str, triangle: bool = False) -> list:
        return [t for t in self.tensors if t.space == space and (not t.triangle or triangle)]

    # ------------------------------------------------------------ expressions

    def leaf(self, space: str, triangle: bool) -> str:
        """A value at the current point of `space` (its own tensors, or a broadcast edge)."""
        iters = {it for it, _ in SPACES[space]} if space in SPACES else {EDGES[space]}
        options = [(t, "full") for t in self.values(space, triangle)]
        for edge, it in EDGES.items():
            if it in iters and space != edge:
                options += [(t, "edge") for t in self.values(edge)]
        roll = self.rng.random()
        if not options or roll < 0.08:
            return self.rng.choice(["0.5", "2.0", "1.0", "3", "0.125", "448.0", "(-1.5)", "0.0", "(-0.0)"])
        if roll < 0.12:
            return self.rng.choice(sorted(iters))
        t, kind = self.rng.choice(options)
        if kind == "edge":
            return f"{t.name}[{EDGES[t.space]}]"
        return f"{t.name}[{', '.join(it for it, _ in SPACES[space])}]" if space in SPACES else f"{t.name}[{EDGES[space]}]"

    def expr(self, space: str, triangle: bool, depth: int = 0) -> str:
        roll = self.rng.random()
        if depth >= 2 or roll < 0.3:
            return self.leaf(space, triangle)
        if roll < 0.65:
            op = self.rng.choice(["+", "-", "*", "*", "/"])
            rhs = self.expr(space, triangle, depth + 1)
            if op == "/":
                rhs = self.rng.choice(["2.0", "3.0", "448.0", "0.25", f"(abs({rhs}) + 1.0)"])
            lhs = self.expr(space, triangle, depth + 1)
            if op == "-" and self.rng.random() < 0.25:  # what TVM's simplifier would fold (backends/tilelang/ieee.py)
                return self.rng.choice([f"({lhs} - {lhs})", f"(({lhs} + {rhs}) - {lhs})", f"({lhs} - ({lhs} + {rhs}))"])
            return f"({lhs} {op} {rhs})"
        if roll < 0.9:
            return _unary(self.rng.choice(UNARY), self.expr(space, triangle, depth + 1))
        a, b = self.expr(space, triangle, depth + 1), self.expr(space, triangle, depth + 1)
        kind = self.rng.choice(["max", "min", "where"])
        if kind == "where":
            return f"where({a} > {b}, {a}, {b})"
        return f"{kind}({a}, {b})"

    # ------------------------------------------------------------ statements

    def add(self, target: str, space: str, text: str, dtype: str, triangle: bool = False) -> None:
        self.stmts.append(_Stmt(target, space, text, dtype, triangle))
        self.tensors.append(_Tensor(target, space, dtype, triangle))

    def anchored(self, space: str, triangle: bool) -> Optional[str]:
        """An expression that reads a whole tensor of `space` plainly (so every iterator's range is inferred)."""
        full = self.values(space, triangle)
        if not full:
            return None
        t = self.rng.choice(full)
        index = ", ".join(it for it, _ in SPACES[space]) if space in SPACES else EDGES[space]
        anchor = f"{t.name}[{index}]"
        body = self.expr(space, triangle)
        if anchor in body:
            return body
        return f"({anchor} {self.rng.choice(['+', '*', '-'])} {body})" if self.rng.random() < 0.7 else anchor

    def elementwise(self) -> None:
        space = self.rng.choice(["MN", "MN", "MK", "KN", "M", "N"])
        triangle = space == "MN" and self.rng.random() < 0.2
        body = self.anchored(space, triangle)
        if body is None:
            return
        name = self.fresh("T")
        cond = " : j <= i" if triangle else ""
        self.add(name, space, f"{cond}]{self._annot()} = {body}", self._dtype(), triangle)

    def integer_map(self) -> None:
        """An elementwise map whose value is an integer of the iterators (an index, a distance, a count), chosen
        by a comparison of data: the narrow dtypes hold it exactly only while its integers are small, which
        decides whether its rounding may be dropped (compiler/legality/integers.py)."""
        space = self.rng.choice(["MN", "MN", "MK", "M", "N"])
        full = self.values(space)
        if not full:
            return
        iters = [it for it, _ in SPACES[space]] if space in SPACES else [EDGES[space]]
        anchor = f"{self.rng.choice(full).name}[{', '.join(iters)}]"
        other = self.integer_expr(iters + _edges(space)) if self.rng.random() < 0.6 else anchor
        value = f"where({anchor} > 0.0, {self.integer_expr(iters + _edges(space))}, {other})"
        self.add(self.fresh("T"), space, f"]{self._annot()} = {value}", self._dtype())

    def integer_expr(self, names: list, depth: int = 0) -> str:
        """An integer value of `names` (iterators and sizes) and small constants."""
        iters = [n for n in names if n.islower()]
        roll = self.rng.random()
        if depth >= 2 or roll < 0.3:
            return self.rng.choice(names + ["1", "2", "3", "17", "(-5)"])
        if roll < 0.7:
            op = self.rng.choice(["+", "-", "*"])
            return f"({self.integer_expr(names, depth + 1)} {op} {self.integer_expr(names, depth + 1)})"
        if roll < 0.8:
            return f"abs({self.integer_expr(names, depth + 1)})"
        a, b = self.integer_expr(names, depth + 1), self.integer_expr(names, depth + 1)
        if roll < 0.9:
            return f"{self.rng.choice(['max', 'min'])}({a}, {b})"
        cond = f"{self.rng.choice(iters)} {self.rng.choice(['<', '==', '>='])} {self.rng.choice(['2', '5'])}"
        return f"where({cond}, {a}, {b})"

    def reduction(self) -> None:
        space = self.rng.choice(["MN", "MN", "MK", "KN"])
        (a, ea), (b, eb) = SPACES[space]
        # reduce the second axis (a row statistic) or the first (a column statistic)
        keep, keep_edge, red = (a, ea, b) if self.rng.random() < 0.75 else (b, eb, a)
        triangle = space == "MN" and self.rng.random() < 0.25
        op = self.rng.choice(["sum", "sum", "max", "min"])
        cond = " : j <= i" if triangle else ""
        body = self.anchored(space, triangle)
        if body is None:
            return
        start = f" from {self.expr(keep_edge, False)}" if op == "sum" and self.rng.random() < 0.35 else ""
        accum = self.rng.choice(["", "", "", " accum f32", " accum bf16", " accum f16"])
        policies = ["", "", "", "", " combine reassoc", " combine deterministic"]
        if op == "sum":  # fast_accum is a sum's alone; a sum from a value has no segments
            policies += [" combine fast_accum", " combine fast_accum(4)"]
        if not start:
            policies.append(f" combine segments({self.rng.choice((2, 3))})")
        combine = self.rng.choice(policies)
        name = self.fresh("r")
        text = f"]{self._annot()} = {op}({red}{cond}) {_paren(body)}{start}{accum}{combine}"
        dtype = self._dtype()
        self.stmts.append(_Stmt(name, keep_edge, text, dtype, lhs=[keep]))
        self.tensors.append(_Tensor(name, keep_edge, dtype))

    def softmax(self) -> None:
        """A row maximum (usually `combine online`), exponentials of the values minus it, and sums linear in them
        (the shape `online(m)` rewrites), sometimes a normalisation that reads the exponentials directly."""
        triangle = self.rng.random() < 0.3
        values = self.values("MN", triangle)
        if not values:
            return
        x = self.rng.choice(values).name
        cond = " : j <= i" if triangle else ""
        combine = " combine online" if self.rng.random() < 0.8 else ""
        m = self.fresh("m")
        self.stmts.append(_Stmt(m, "M", f"]{self._annot()} = max(j{cond}) {x}[i, j]{combine}", self._dtype(), lhs=["i"]))
        self.tensors.append(_Tensor(m, "M", self.stmts[-1].dtype))
        scale = self.rng.choice(["", " * 0.5", " / 3.0", " * 0.125"])
        e = self.fresh("E")
        self.add(e, "MN", f"{cond}]{self._annot()} = exp(({x}[i, j] - {m}[i]){scale})", self._dtype(), triangle)
        l_ = self.fresh("r")
        self.stmts.append(_Stmt(l_, "M", f"]{self._annot()} = sum(j{cond}) {e}[i, j] accum f32", self._dtype(),
                                lhs=["i"]))
        self.tensors.append(_Tensor(l_, "M", self.stmts[-1].dtype))
        weights = self.values("N")
        if weights and self.rng.random() < 0.6:
            u = self.fresh("r")
            w = self.rng.choice(weights).name
            self.stmts.append(_Stmt(u, "M", f"]{self._annot()} = sum(j{cond}) {e}[i, j] * {w}[j] accum f32",
                                    self._dtype(), lhs=["i"]))
            self.tensors.append(_Tensor(u, "M", self.stmts[-1].dtype))
            self.add(self.fresh("T"), "M", f"]{self._annot()} = {u}[i] / {l_}[i]", self._dtype())
        if self.rng.random() < 0.2:  # a reader that cannot be rescaled: online(m) must refuse
            self.add(self.fresh("T"), "MN", f"{cond}]{self._annot()} = {e}[i, j] / {l_}[i]", self._dtype(), triangle)

    def recurrence(self) -> None:
        """A statement that reads its own earlier elements: along one axis at distance 1 or 2 (a scan or a
        first-order filter, `where` giving the first elements their value), along the anti-diagonal of MN, or a
        triangular sum over the finished rows (`r[i] = sum(j : j <= i) X[i, j] * where(j == i, 1.0, r[j])`)."""
        kind = self.rng.choice(["axis", "axis", "diagonal", "sum"])
        space = "MN" if kind != "axis" else self.rng.choice(["MN", "MN", "M", "N"])
        body = self.anchored(space if kind != "sum" else "MN", kind == "sum")
        if body is None:
            return
        name = self.fresh("R")
        dtype = self._dtype()
        if kind == "sum":
            accum = self.rng.choice(["", " accum f32"])
            text = f"]{self._annot()} = sum(j : j <= i) {_paren(body)} * where(j == i, 1.0, {name}[j]){accum}"
            self.stmts.append(_Stmt(name, "M", text, dtype, lhs=["i"]))
            self.tensors.append(_Tensor(name, "M", dtype))
            return
        iters = [it for it, _ in SPACES[space]] if space in SPACES else [EDGES[space]]
        coef = self.rng.choice(["", " * 0.5", " * (-0.25)", " * 1.0"])
        op = self.rng.choice(["+", "-", "*"])
        if kind == "diagonal":
            prev = f"{name}[i - 1, j + 1]"
            value = f"where(i == 0, {body}, where(j == N - 1, {body}, ({prev}{coef}) {op} {_paren(body)}))"
        else:
            axis = self.rng.randrange(len(iters))
            d = self.rng.choice([1, 1, 2])
            at = [f"{it} - {d}" if n == axis else it for n, it in enumerate(iters)]
            prev = f"{name}[{', '.join(at)}]"
            value = f"where({iters[axis]} < {d}, {body}, ({prev}{coef}) {op} {_paren(body)})"
        self.add(name, space, f"]{self._annot()} = {value}", dtype)

    def time_loop(self) -> None:
        """A loop block over T steps in a 1-D or 2-D space: P is the state at the start of a step (a value of the
        program at t = 0, the last step's Q after), Q the state after it, from P at the element and at a
        neighbour along one axis (guarded at the edge); then a statement of the space takes the last step."""
        space = self.rng.choice(["M", "N", "MN"])
        body = self.anchored(space, False)
        if body is None:
            return
        iters = [it for it, _ in SPACES[space]] if space in SPACES else [EDGES[space]]
        p_name, q_name, out = self.fresh("P"), self.fresh("Q"), self.fresh("S")
        at = ", ".join(["t"] + iters)
        axis = self.rng.randrange(len(iters))
        d = self.rng.choice([1, -1])
        edge = f"{iters[axis]} == 0" if d == 1 else f"{iters[axis]} == {_edges(space)[axis]} - 1"
        moved = ", ".join(["t"] + [f"{it} - {d}" if n == axis else it for n, it in enumerate(iters)]).replace("- -1", "+ 1")
        op = self.rng.choice(["+", "-", "*"])
        self.stmts.append(_Stmt(p_name, space, f"]: {self._dtype()} = where(t == 0, {body}, {q_name}[t - 1, {', '.join(iters)}])",
                                "f32", lhs=["t"] + iters, block="T"))
        self.stmts.append(_Stmt(q_name, space, f"]: {self._dtype()} = where({edge}, {p_name}[{at}], "
                                               f"({p_name}[{at}] * 0.5) {op} {p_name}[{moved}])",
                                "f32", lhs=["t"] + iters, block="T"))
        self.add(out, space, f"]{self._annot()} = {q_name}[T - 1, {', '.join(iters)}]", self._dtype())
        self.steps = True

    def matmul(self) -> None:
        left, right = self.values("MK"), self.values("KN")
        if not left or not right:
            return
        a, b = self.rng.choice(left), self.rng.choice(right)
        body = f"{a.name}[i, k] * {b.name}[k, j]"
        if self.rng.random() < 0.2:
            body = f"0.5 * {body}"
        start = f" from {self.expr('MN', False)}" if self.rng.random() < 0.35 else ""
        accum = self.rng.choice(["", " accum f32", " accum f32", " accum bf16"])
        name = self.fresh("C")
        self.add(name, "MN", f"]{self._annot()} = sum(k) {body}{start}{accum}", self._dtype())

    def _dtype(self) -> str:
        return self.rng.choice(DTYPES)

    def _annot(self) -> str:
        return "@DTYPE@"  # filled in when the statement's role (temporary or result) is known


def random_program(rng: random.Random) -> str:
    b = _Builder(rng)
    spaces = rng.sample(["MN", "MK", "KN", "M", "N"], k=rng.randint(1, 4))
    if "MK" in spaces and rng.random() < 0.6:
        spaces.append("KN")
    for space in dict.fromkeys(spaces):
        b.tensors.append(_Tensor(f"X{space}", space, rng.choice(DTYPES), is_input=True))
    for _ in range(rng.randint(1, 5)):
        rng.choice([b.elementwise, b.elementwise, b.reduction, b.matmul, b.softmax, b.recurrence, b.time_loop,
                    b.integer_map])()
    full = [s for s in b.stmts if not s.triangle and not s.block]
    while not full:
        b.elementwise()
        full = [s for s in b.stmts if not s.triangle and not s.block]
    outputs = [full[-1]] + ([full[-2]] if len(full) > 1 and rng.random() < 0.3 else [])
    stored = _in_place(b, outputs) if rng.random() < 0.15 else {}
    text = _text(b, outputs, stored)
    if stored and parse_check(text) is not None:  # the program reads an input after its result replaced it
        text = _text(b, outputs, {})
    return text


def _in_place(b: _Builder, outputs: list) -> dict:
    """Results declared in the array of an input of their dtype and space (`-> (Y: f32[M, N] in XMN)`)."""
    stored, free = {}, [t for t in b.tensors if t.is_input]
    for s in outputs:
        same = [t for t in free if t.dtype == s.dtype and t.space == s.space and not t.triangle]
        if same and not s.triangle:
            stored[s.target] = b.rng.choice(same).name
            free = [t for t in free if t.name != stored[s.target]]
    return stored


def _text(b: _Builder, outputs: list, stored: dict) -> str:
    used = {t.space for t in b.tensors} | {s.space for s in b.stmts}
    sizes = sorted({e for sp in used for e in (_edges(sp))} | ({"T"} if b.steps else set()))
    params = [s for s in sizes if b.rng.random() < 0.15]
    lines = [f"const {', '.join(f'{s} = 8' for s in sizes if s not in params)}" if len(params) < len(sizes) else ""]
    if params:
        lines.append(f"param {', '.join(params)}")
    ins = [t for t in b.tensors if t.is_input]
    outs = {s.target for s in outputs}
    decl = lambda name, dtype, space: f"{name}: {dtype}[{', '.join(_edges(space))}]"  # noqa: E731
    params_text = ", ".join(decl(t.name, t.dtype, t.space) for t in ins)
    results_text = ", ".join(decl(s.target, s.dtype, s.space) + (f" in {stored[s.target]}" if s.target in stored else "")
                             for s in outputs)
    lines.append(f"kernel fz({params_text}) -> ({results_text}) {{")
    in_block = False
    for s in b.stmts:
        if bool(s.block) != in_block:
            lines.append(f"  for t < {s.block} {{" if s.block else "  }")
            in_block = bool(s.block)
        elif s.block and s.target.startswith("P"):  # a new time loop right after another one
            lines.extend(["  }", f"  for t < {s.block} {{"])
        lhs = s.lhs or ([it for it, _ in SPACES[s.space]] if s.space in SPACES else [EDGES[s.space]])
        annot = "" if s.target in outs else f": {s.dtype}"
        pad = "    " if s.block else "  "
        lines.append(f"{pad}{s.target}[{', '.join(lhs)}{s.text.replace('@DTYPE@', annot)}")
    if in_block:
        lines.append("  }")
    lines.append("}")
    return "\n".join(line for line in lines if line) + "\n"


def _edges(space: str) -> list:
    return [e for _, e in SPACES[space]] if space in SPACES else [space]


def _paren(text: str) -> str:
    return text if text.startswith("(") else f"({text})"


def _unary(fn: str, x: str) -> str:
    if fn == "neg":
        return f"(-{x})"
    if fn == "sqrtabs":
        return f"sqrt(abs({x}))"
    if fn == "rsqrt1":
        return f"rsqrt(abs({x}) + 1.0)"
    if fn == "square":
        return f"({x} * {x})"
    if fn == "inverse1":  # fast_inverse away from 0 and the subnormals, where it may flush (docs/language.md)
        return f"fast_inverse(abs({x}) + 1.0)"
    if fn == "fma1":  # x·x + 0.5 rounded once: a backend that rounded the product first would differ
        return f"fma({x}, {x}, 0.5)"
    return f"{fn}({x})"


def parse_check(text: str) -> Optional[str]:
    """None when the frontend accepts the program, else its first error line (for the generator's tests)."""
    from tdsl.compiler.driver.api import loads
    from tdsl.frontend.diagnostics import TdslError

    try:
        loads(text, "fuzz.tdsl")
    except TdslError as err:
        return str(err).splitlines()[0]
    return None
