"""Running maxima (online softmax): what a `combine online` maximum lets its readers do, found in the program.

The mathematical softmax waits for the row maximum before it exponentiates anything::

    m[i] = max(j) X[i, j] combine online
    P[i, j] = exp((X[i, j] - m[i]) * c)          # an *exponential* of m
    l[i] = sum(j) P[i, j]                         # *accumulators*: sums linear in an exponential
    U[i, e] = sum(j) P[i, j] * V[j, e]
    O[i, e] = U[i, e] / l[i]

FlashAttention computes it in one pass over j by letting P read the *running* maximum and rescaling the
sums whenever the maximum grows: exp((x - m_old)·c) · exp((m_old - m_new)·c) = exp((x - m_new)·c), so an
accumulator built with m_old becomes one built with m_new when multiplied by exp((m_old - m_new)·c).  In
exact arithmetic nothing changes; in floating point the rounding does (docs/rules/online-policy.md), which is
why the program must declare `combine online` on the maximum.

`online_form(model, stat)` finds, for one maximum, the statements the rewrite applies to:

* the statistic `m = max(...) X[...]`: its term is one read of a tensor X;
* the *exponentials*: plain statements whose value is linear in one factor exp((X[..] - m[..])·c) (also
  written exp(X - m), exp(c·(X - m)), exp((X - m) / c), exp(X·c - m·c), exp(fma(X, c, -(m·c))), and each with
  exp2; c a positive constant), every reader of which is an accumulator.  Linear (`_linear`): the factor times
  values free of it, rounded, or kept where a condition free of m holds and 0 elsewhere (`where(j <= i, ...,
  0.0)`: a 0 rescales to 0);
* the *derived exponentials*: plain statements linear in one read of an exponential (or of another derived
  one), every reader of which is again an accumulator or a derived exponential.  `P: bf16 = E` is one: it
  rounds E's values, made with the running maximum, which the sums of P then rescale like sums of E
  (FlashAttention sums the unrounded E into l and multiplies V by the rounded P);
* the *accumulators*: `sum` reductions whose term is linear in one such factor, either directly
  (`s = sum(j) exp(X - m)`) or through one read of an exponential or derived exponential (`l = sum(j) P`).
  Each gets a `Rescale`: the element of m its terms are computed with, and the factor that moves it (the
  exponential as written, X read as the maximum the sum was built with and m as the current one).

Readers of m that are neither (a normalisation `Y = exp(X - m) / s`, a `lse = m + log(l)`) keep reading the
complete maximum.  `running_dependences` then replaces "every update of m before each exponential" by "the
update that took the exponential's own element of X into m" and adds "every update of m before a reader of
an accumulator"; compiler/legality/online.py checks what depends on the schedule (no term goes stale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import islpy as isl

from tdsl.frontend import ast
from tdsl.compiler.model.dependences import Dependence
from tdsl.compiler.model.program import KernelModel, Stmt, read_relation

# The two names of a `Rescale.factor`: the maximum the accumulator was built with, and the current one.
REF = "__online_ref"
MAX = "__online_max"

CASTS = ast.DTYPES  # the casts of the language (one per dtype): a rounding, linear in what it rounds


@dataclass(frozen=True)
class Rescale:
    """How an accumulator follows a running maximum: before adding a term computed with the maximum's current
    value M, an accumulator built with the value R is multiplied by factor[REF := R, MAX := M]."""

    stat: str  # the maximum's tensor
    index: tuple  # the element of `stat` its terms use, as expressions of the accumulator's iterators
    factor: ast.Call  # exp((REF - MAX) * c), in the form the program's exponential is written (exp2, fma ...)
    # the statements between the sum and the maximum: the one it reads (`source`) back to the exponential that
    # reads the maximum (`exponential`); () when the factor is in the sum's own term
    chain: tuple = ()

    @property
    def source(self) -> Optional[str]:
        """The exponential or derived exponential the sum reads (None: the factor is in its own term)."""
        return self.chain[0] if self.chain else None

    @property
    def exponential(self) -> Optional[str]:
        """The statement whose value exp((X - m)·c) the sum's terms carry (None: the sum's own term)."""
        return self.chain[-1] if self.chain else None


@dataclass(frozen=True)
class OnlineForm:
    stat: str
    values: str  # X, the tensor the maximum is taken over
    exponentials: tuple  # plain statements reading the running maximum
    accumulators: dict  # sum reduction -> its Rescale
    derived: tuple = ()  # plain statements linear in an exponential's value (roundings of it, multiples of it)


class NotOnline(Exception):
    """The program does not have the form the rewrite needs; `reason` says where it differs."""

    def __init__(self, reason: str, statements: list[str]):
        self.reason = reason
        self.statements = statements
        super().__init__(reason)


def online_form(model: KernelModel, stat: str) -> OnlineForm:
    m = model.stmt(stat)
    if m.reduce_op != "max":
        raise NotOnline(f"{stat} is not a max reduction; only a running maximum can be rescaled", [stat])
    if not isinstance(m.value, ast.Access):
        raise NotOnline(f"the term of {stat} must be one tensor read (max(j) X[i, j]) for its readers to "
                        f"subtract it from the same values", [stat])
    values = m.value.tensor
    partial = next((s for s in model.stmts if s.name == values and s.reduce_op == "max"), None)
    if partial is not None:
        raise NotOnline(f"the terms of {stat} are the partial maxima {values} (an rfactor of {stat}), not the values "
                        f"its exponentials subtract it from: a running maximum is one reduction, so leave {stat} "
                        f"whole (the sums that follow it may be rfactored)", [stat, values])
    readers = [s for s in _readers(model, stat) if s.name != stat]
    exponentials, derived, accumulators, refused = [], [], {}, []
    for r in readers:
        factor = _exp_factor(model, r, stat, values)
        if factor is None:
            refused.append(f"{r.name} does not read {stat} only inside one factor exp(({values} - {stat})·c) of "
                           f"its value{_inline_hint(model, r, stat)}")
            continue
        if r.is_reduction:
            if r.init is not None:
                refused.append(f"{r.name} starts from a value (`from`), which rescaling would scale too")
            elif r.reduce_op == "sum" and _linear(model, r.value, lambda e: e is factor, _mentions(stat)):
                accumulators[r.name] = _direct_rescale(model, factor, stat, values)
            else:
                refused.append(f"{r.name} is a {r.reduce_op} of exp(({values} - {stat})·c) that is not linear in it")
            continue
        if not _linear(model, r.value, lambda e: e is factor, _mentions(stat)):
            where = any(isinstance(e, ast.Call) and e.func == "where" for e in ast.walk(r.value))
            refused.append(f"{r.name} is not linear in exp(({values} - {stat})·c)" + (
                f" (a where around it must give 0 in its other branch, on a condition that does not read {stat})"
                if where else ""))
            continue
        sums, chained, why = _summing_readers(model, (r.name,), stat, values, factor)
        if why:
            refused.append(why)
            continue
        exponentials.append(r.name)
        derived += [d for d in chained if d not in derived]
        accumulators.update(sums)
    if not accumulators:
        detail = "; ".join(refused) if refused else f"nothing reads {stat}"
        raise NotOnline(f"no statement can use the running maximum {stat}: {detail}",
                        [stat] + [r.name for r in readers])
    for name in accumulators:
        acc = model.stmt(name)
        if acc.combine and acc.combine.startswith("segments("):
            raise NotOnline(f"{name} declares `combine {acc.combine}`: its segments would need a maximum each",
                            [name])
    form = OnlineForm(stat, values, tuple(exponentials), accumulators, tuple(derived))
    _check_one_factor(model, form)
    _check_single_maximum(model, form)
    return form


def mark_exponent_reads(model: KernelModel) -> None:
    """Mark every read of a `combine online` maximum m that is the m of a factor exp((X - m)·c) (X the
    maximum's term, any written form `_split_exponent` knows) to be read as 0 where it is -inf, in every order.

    A row whose terms so far are all -inf (a mask held in an input as -inf, `where(..., -inf)`) has a running
    maximum of -inf, and exp((-inf) - (-inf)) is NaN where the complete maximum, finite once the row meets a
    finite term, gives exp(-inf) = 0.  Reading m as 0 there gives exp(-inf - 0) = 0, which is what the complete
    maximum gives, and changes nothing where m is finite (FlashAttention's convention).  A row with no finite
    term at all gets 0 for its exponentials instead of NaN, in program order as after `online`.

    The factor is looked for in each statement's value with the program's plain temporaries substituted
    (`_substituted`), because `compute_inline` can make one: with `Z = S - m` and `E = exp(Z * c)`, the read of m
    in Z is marked, so the program means the same before and after Z is inlined (probe of the 26th session).  The
    mark lives on the AST node, so it follows the read through every rewrite of the program (compute_inline,
    compute_at's re-indexing)."""
    for m in model.stmts:
        if m.reduce_op != "max" or m.combine != "online" or not isinstance(m.value, ast.Access):
            continue
        values = m.value.tensor
        temps = {s.name: s for s in model.stmts if not s.is_reduction and s.name != values
                 and model.tensors[s.name].kind == "temp"}
        for stmt in model.stmts:
            for e in ast.walk(_substituted(stmt.value, temps, {stmt.name})):
                if isinstance(e, ast.Call) and e.func in EXPONENTIALS and len(e.args) == 1:
                    split = _split_exponent(model, e.args[0], m.name, values)
                    if split is not None:
                        split[1].neg_inf_as_zero = True


def _substituted(e: ast.Expr, temps: dict, seen: set) -> ast.Expr:
    """`e` with every read of a statement of `temps` replaced by that statement's value, recursively (not its
    own, nor one already being substituted); every other read is the program's node itself, so that a mark put
    on it marks the program."""

    def substitute(x):
        if not isinstance(x, ast.Access):
            return None
        if x.tensor in temps and x.tensor not in seen:
            return _substituted(temps[x.tensor].value, temps, seen | {x.tensor})
        return x

    return ast.rewrite(e, substitute)


# ---------------------------------------------------------------- matching the exponentials


EXPONENTIALS = ("exp", "exp2")  # exp2(x) = 2^x: exp2((X - m)·c) is exp((X - m)·c·ln 2), a factor of the same kind


def _exp_factor(model: KernelModel, stmt: Stmt, stat: str, values: str) -> Optional[ast.Call]:
    """The one call exp((X - m)·c) (or exp2) of `stmt`'s value, when every read of m is inside it; None otherwise."""
    calls = [e for e in ast.walk(stmt.value) if isinstance(e, ast.Call) and e.func in EXPONENTIALS
             and len(e.args) == 1 and _split_exponent(model, e.args[0], stat, values) is not None]
    reads_m = [e for e in ast.walk(stmt.value) if isinstance(e, ast.Access) and e.tensor == stat]
    if len(calls) != 1:
        return None
    inside = [e for e in ast.walk(calls[0]) if isinstance(e, ast.Access) and e.tensor == stat]
    return calls[0] if len(inside) == len(reads_m) == 1 else None


def _split_exponent(model: KernelModel, arg: ast.Expr, stat: str, values: str):
    """(X read, m read) when `arg` is (X - m)·c with a constant c > 0, written as the difference scaled
    (X - m, (X - m) * c, c * (X - m), (X - m) / c) or as the difference of the scaled values (X * c - m * c, or
    fma(X, c, -(m * c)): FlashAttention's one FFMA, with m * c computed once per row)."""
    return _scaled_difference(model, arg, stat, values) or _difference_of_scaled(model, arg, stat, values)


def _scaled_difference(model: KernelModel, arg: ast.Expr, stat: str, values: str):
    diff, scale = arg, None
    if isinstance(arg, ast.BinOp) and arg.op in ("*", "/"):
        if _is_difference(arg.lhs, stat, values):
            diff, scale = arg.lhs, arg.rhs
        elif arg.op == "*" and _is_difference(arg.rhs, stat, values):
            diff, scale = arg.rhs, arg.lhs
    if not _is_difference(diff, stat, values):
        return None
    if scale is not None and _positive_constant(model, scale) is None:
        return None
    return diff.lhs, diff.rhs


def _difference_of_scaled(model: KernelModel, arg: ast.Expr, stat: str, values: str):
    """X * c - m * c, or fma(X, c, -(m * c)), with the same constant c > 0 on both sides (either operand order)."""
    if isinstance(arg, ast.BinOp) and arg.op == "-":
        x, m = _scaled_read(model, arg.lhs, values), _scaled_read(model, arg.rhs, stat)
    elif isinstance(arg, ast.Call) and arg.func == "fma" and len(arg.args) == 3:
        x = _scaled_read(model, ast.BinOp("*", arg.args[0], arg.args[1]), values)
        m = _scaled_read(model, arg.args[2].operand, stat) if isinstance(arg.args[2], ast.Neg) else None
    else:
        return None
    if x is None or m is None or x[1] != m[1]:
        return None
    return x[0], m[0]


def _scaled_read(model: KernelModel, e: ast.Expr, tensor: str):
    """(the read, c) when `e` is tensor[..] * c or c * tensor[..] with a constant c > 0."""
    if not (isinstance(e, ast.BinOp) and e.op == "*"):
        return None
    for read, scale in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        if isinstance(read, ast.Access) and read.tensor == tensor:
            c = _positive_constant(model, scale)
            if c is not None:
                return read, c
    return None


def _positive_constant(model: KernelModel, e: ast.Expr) -> Optional[float]:
    c = constant(model, e)
    return c if c is not None and c > 0 and not math.isinf(c) else None


def _is_difference(e: ast.Expr, stat: str, values: str) -> bool:
    return (isinstance(e, ast.BinOp) and e.op == "-" and isinstance(e.lhs, ast.Access) and e.lhs.tensor == values
            and isinstance(e.rhs, ast.Access) and e.rhs.tensor == stat)


def constant(model: KernelModel, e: ast.Expr) -> Optional[float]:
    """The value of an expression of literals and bound constants (None if it reads anything else)."""
    if isinstance(e, (ast.IntLit, ast.FloatLit)):
        return float(e.value)
    if isinstance(e, ast.Name):
        v = model.sizes.get(e.name)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if isinstance(e, ast.Neg):
        v = constant(model, e.operand)
        return None if v is None else -v
    if isinstance(e, ast.BinOp) and e.op in ("+", "-", "*", "/"):
        a, b = constant(model, e.lhs), constant(model, e.rhs)
        if a is None or b is None or (e.op == "/" and b == 0):
            return None
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b if e.op == "*" else a / b
    return None


def _mentions(*tensors: str):
    names = set(tensors)
    return lambda e: any(isinstance(x, ast.Access) and x.tensor in names for x in ast.walk(e))


def _inline_hint(model: KernelModel, reader: Stmt, stat: str) -> str:
    """For a temporary that computes part of an exponent (`Z = S - m`, `nmc = -(m * c)`): inlining it makes the
    factor one expression of its reader, which the rewrite can follow."""
    if reader.is_reduction or model.tensors[reader.name].kind != "temp" or not _readers(model, reader.name):
        return ""
    return f" (if {reader.name} is part of an exponent, compute_inline({reader.name}) before online({stat}))"


def _linear(model: KernelModel, e: ast.Expr, is_factor, mentions) -> bool:
    """`e` is the factor times (or divided by) expressions free of it: a product of it with other values, a
    rounding of such a product (a cast rounds, it does not change the dependence on the factor), such a value
    where a condition free of it holds and 0 elsewhere."""
    if is_factor(e):
        return True
    if isinstance(e, ast.BinOp) and e.op == "*":
        return ((_linear(model, e.lhs, is_factor, mentions) and not mentions(e.rhs))
                or (_linear(model, e.rhs, is_factor, mentions) and not mentions(e.lhs)))
    if isinstance(e, ast.BinOp) and e.op == "/":
        return _linear(model, e.lhs, is_factor, mentions) and not mentions(e.rhs)
    if isinstance(e, ast.Neg):
        return _linear(model, e.operand, is_factor, mentions)
    if isinstance(e, ast.Call) and e.func in CASTS and len(e.args) == 1:
        return _linear(model, e.args[0], is_factor, mentions)
    if isinstance(e, ast.Call) and e.func == "where" and len(e.args) == 3:
        # where(c, x, 0) or where(c, 0, x): x where c picks it, 0 elsewhere, and a rescaled 0 stays 0
        cond, then, other = e.args
        zero = lambda x: constant(model, x) == 0  # noqa: E731 - 0, -0.0, 0.0 * 5.0, a const of 0
        return not mentions(cond) and ((zero(other) and _linear(model, then, is_factor, mentions))
                                       or (zero(then) and _linear(model, other, is_factor, mentions)))
    return False


def _summing_readers(model: KernelModel, chain: tuple, stat: str, values: str, factor: ast.Call):
    """({accumulator: Rescale}, derived exponentials, "") when every reader of chain[0] sums it linearly or is a
    derived exponential whose readers do; ({}, (), why) if not.  `chain` runs from the statement whose readers
    are examined back to the exponential that reads the maximum."""
    stmt = model.stmt(chain[0])
    readers = _readers(model, stmt.name)
    if not readers:
        return {}, (), f"nothing sums {stmt.name}"
    found, derived = {}, []
    mentions = _mentions(stmt.name, stat)
    for r in readers:
        reads = [e for e in ast.walk(r.value) if isinstance(e, ast.Access) and e.tensor == stmt.name]
        if r.init is not None:
            return {}, (), f"{r.name} sums {stmt.name} from a value (`from`), which rescaling would scale too"
        linear = len(reads) == 1 and _linear(model, r.value, lambda e: e is reads[0], mentions)
        if not r.is_reduction and linear and r.name not in chain and _readers(model, r.name):
            sums, more, why = _summing_readers(model, (r.name,) + chain, stat, values, factor)
            if why:
                return {}, (), why
            found.update(sums)
            derived += [r.name] + [d for d in more if d not in derived]
            continue
        if r.reduce_op != "sum" or not linear:
            return {}, (), (f"{stmt.name} is read by {r.name}, which is not a sum linear in {stmt.name}: it would "
                            f"use exponentials of a partial maximum that nothing rescales")
        found[r.name] = _summed_rescale(model, chain, reads[0], factor, stat, values)
    return found, tuple(derived), ""


def _rescale_factor(model: KernelModel, factor: ast.Call, stat: str, values: str) -> ast.Call:
    """The factor with its read of X as REF and its read of m as MAX: it moves a sum from REF to MAX."""
    x_read, m_read = _reads(model, factor, stat, values)
    names = {id(x_read): REF, id(m_read): MAX}
    return ast.rewrite(factor, lambda e: ast.Name(names[id(e)], e.span) if id(e) in names else None)


def _reads(model: KernelModel, factor: ast.Call, stat: str, values: str) -> tuple[ast.Access, ast.Access]:
    """The factor's read of X and its read of m."""
    return _split_exponent(model, factor.args[0], stat, values)


def _direct_rescale(model: KernelModel, factor: ast.Call, stat: str, values: str) -> Rescale:
    m_read = _reads(model, factor, stat, values)[1]
    return Rescale(m_read.tensor, tuple(m_read.indices), _rescale_factor(model, factor, stat, values))


def _summed_rescale(model: KernelModel, chain: tuple, read: ast.Access, factor: ast.Call, stat: str,
                    values: str) -> Rescale:
    """The exponential's read of m, in the accumulator's iterators: each statement's iterators are the indices
    it writes, so the accumulator's read of chain[0], chain[0]'s read of chain[1] ... say which instance of the
    exponential made each term."""
    m_read = _reads(model, factor, stat, values)[1]
    indices = tuple(m_read.indices)  # in the exponential's iterators, then in each reader's down the chain
    for k in range(len(chain) - 1, -1, -1):
        reader_read = read if k == 0 else _read_of(model.stmt(chain[k - 1]), chain[k])
        subst = dict(zip(model.stmt(chain[k]).lhs_iters, reader_read.indices))

        def put(e, subst=subst):
            return subst.get(e.name) if isinstance(e, ast.Name) else None

        indices = tuple(ast.rewrite(i, put) for i in indices)
    return Rescale(m_read.tensor, indices, _rescale_factor(model, factor, stat, values), chain)


def _readers(model: KernelModel, tensor: str) -> list:
    return [s for s in model.stmts if any(r.tensor == tensor for r in s.reads)]


def _read_of(stmt: Stmt, tensor: str) -> ast.Access:
    """A derived exponential's one read of the statement it derives from."""
    return next(e for e in ast.walk(stmt.value) if isinstance(e, ast.Access) and e.tensor == tensor)


def _check_one_factor(model: KernelModel, form: OnlineForm) -> None:
    """Each rescaled value carries the factor exp((X - m)·c) once: a product of two values that carry it (P1 * P2,
    or exp(X - m) * P) would need the factor's square to follow the maximum, not the factor."""
    carriers = set(form.exponentials) | set(form.derived)
    direct = {a for a, r in form.accumulators.items() if r.source is None}
    for name in [*form.exponentials, *form.derived, *form.accumulators]:
        stmt = model.stmt(name)
        carried = [e.tensor for e in ast.walk(stmt.value) if isinstance(e, ast.Access) and e.tensor in carriers]
        own = 1 if name in form.exponentials or name in direct else 0
        if len(carried) + own > 1:
            raise NotOnline(f"{name} multiplies {len(carried) + own} values that carry exp(({form.values} - "
                            f"{form.stat})·c) ({', '.join(carried + ['its own exponential'] * own)}): its rescaling "
                            f"would need the factor's square, not the factor", [name, form.stat])


def _check_single_maximum(model: KernelModel, form: OnlineForm) -> None:
    """All terms of one accumulator element must be computed with one element of m: one rescaling per update."""
    for name, rescale in form.accumulators.items():
        acc = model.stmt(name)
        to_max = accumulator_maximum(model, acc, rescale)
        per_element = acc.write.relation.reverse().apply_range(to_max)
        if not per_element.is_single_valued():
            raise NotOnline(f"the terms of one element of {name} use different elements of {form.stat}; a sum "
                            f"can follow one running maximum only", [name, form.stat])


# ---------------------------------------------------------------- isl relations of the rewrite


def accumulator_maximum(model: KernelModel, acc: Stmt, rescale: Rescale) -> isl.Map:
    """Accumulator instance -> the element of the maximum its term is computed with."""
    stat, values = rescale.stat, model.stmt(rescale.stat).value.tensor
    if rescale.source is None:
        factor = _exp_factor(model, acc, stat, values)
        return read_relation(model, acc, _reads(model, factor, stat, values)[1])
    exp_stmt = model.stmt(rescale.exponential)
    factor = _exp_factor(model, exp_stmt, stat, values)
    m_read = read_relation(model, exp_stmt, _reads(model, factor, stat, values)[1])
    return term_origin(model, acc, rescale).apply_range(m_read)


def term_origin(model: KernelModel, acc: Stmt, rescale: Rescale) -> isl.Map:
    """Accumulator instance -> the instance of the exponential whose value its term carries (through the
    derived exponentials of `rescale.chain`)."""
    rel, reader = None, acc
    for name in rescale.chain:
        stmt = model.stmt(name)
        step = next(r.relation for r in reader.reads if r.tensor == name).apply_range(stmt.write.relation.reverse())
        rel = step if rel is None else rel.apply_range(step)
        reader = stmt
    return rel


def own_term(model: KernelModel, form: OnlineForm, reader: Stmt) -> isl.Map:
    """m instance -> reader instance, where the update took into m the very element of X the reader
    exponentiates (the reader may use m only after it, or exp((x - m)·c) could overflow)."""
    m = model.stmt(form.stat)
    factor = _exp_factor(model, reader, form.stat, form.values)
    x_read, m_read = _reads(model, factor, form.stat, form.values)
    same_element = m.write.relation.apply_range(read_relation(model, reader, m_read).reverse())
    same_value = read_relation(model, m, m.value).apply_range(read_relation(model, reader, x_read).reverse())
    return same_element.intersect(same_value)


def with_rescales(model: KernelModel, form: OnlineForm) -> KernelModel:
    stmts = [replace(s, rescale=form.accumulators[s.name]) if s.name in form.accumulators else s
             for s in model.stmts]
    return replace(model, stmts=stmts)


def running_dependences(model: KernelModel, form: OnlineForm, deps: list[Dependence]) -> list[Dependence]:
    """`deps` with the rewrite: each reader of the running maximum depends only on the update of its own term
    (kind "running"), and every reader of an accumulator on all updates of the maximum it follows ("final")."""
    readers = list(form.exponentials) + [a for a, r in form.accumulators.items() if r.source is None]
    kept = [d for d in deps if not (d.kind == "flow" and d.src == form.stat and d.dst in readers)]
    added = []
    for name in readers:
        rel = own_term(model, form, model.stmt(name))
        uncovered = model.stmt(name).domain.subtract(rel.range())
        if not uncovered.is_empty():
            from tdsl.compiler.model.program import first_point, instance_text

            reader = model.stmt(name)
            raise NotOnline(f"{instance_text(name, reader.iters, first_point(uncovered)[1])} exponentiates an "
                            f"element of {form.values} that {form.stat} never takes into its maximum", [name])
        added.append(Dependence("running", form.stat, name, form.stat, rel.coalesce()))
    m_write = model.stmt(form.stat).write.relation
    for name, rescale in form.accumulators.items():
        acc = model.stmt(name)
        elem_to_max = acc.write.relation.reverse().apply_range(accumulator_maximum(model, acc, rescale))
        for z in model.stmts:
            for r in z.reads:
                if r.tensor != name:
                    continue
                rel = m_write.apply_range(r.relation.apply_range(elem_to_max).reverse())
                if not rel.is_empty():
                    added.append(Dependence("final", form.stat, z.name, name, rel.coalesce()))
    return kept + added
