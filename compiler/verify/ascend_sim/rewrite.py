"""The three mechanical rewrites of an emitted module's `@T.prim_func` bodies before it runs (see the package
docstring): `if` as masked loops, `T.if_then_else` as a lazily evaluated select, subscripts passed to `T.copy` /
`T.tile.*` / `T.reduce_*` as regions or BufferLoads; and, on the 910B, each `T.Scope("V")` run once per vector
core.  The rewritten code calls the machine as `__sim__` (machine.py).
"""

from __future__ import annotations

import ast
from typing import Optional

from tdsl.compiler.verify.ascend_sim.buffers import Unsupported

FILENAME = "<ascend-simulated>"  # the name the module is compiled under: machine._located finds its lines by it


def _is_T(func, name: Optional[str] = None) -> bool:  # noqa: N802
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "T"
            and (name is None or func.attr == name))


def _is_tile(func) -> bool:
    """T.tile.name"""
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "tile"
            and isinstance(func.value.value, ast.Name) and func.value.value.id == "T")


def _sim_call(name, args, node):
    call = ast.Call(ast.Attribute(ast.Name("__sim__", ast.Load()), name, ast.Load()), args, [])
    return ast.copy_location(call, node)


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.n = 0

    def visit_If(self, node):  # noqa: N802
        self.generic_visit(node)
        for sub in ast.walk(ast.Module(body=node.body + node.orelse, type_ignores=[])):
            if isinstance(sub, (ast.Break, ast.Continue, ast.Return)):
                raise Unsupported(f"line {node.lineno}: break/continue/return inside an if")
        self.n += 1
        tmp = f"__sim_cond_{self.n}"
        out = [ast.copy_location(ast.Assign([ast.Name(tmp, ast.Store())], node.test), node)]
        for fn, body in (("when", node.body), ("unless", node.orelse)):
            if body:
                loop = ast.For(ast.Name("__sim_", ast.Store()), _sim_call(fn, [ast.Name(tmp, ast.Load())], node), body,
                               [])
                out.append(ast.copy_location(loop, node))
        return out

    def visit_Call(self, node):  # noqa: N802
        self.generic_visit(node)
        if _is_T(node.func, "if_then_else") and len(node.args) == 3 and not node.keywords:
            c, a, b = node.args
            def thunk(e):
                return ast.copy_location(ast.Lambda(ast.arguments([], [], None, [], [], None, []), e), e)

            return _sim_call("select", [c, thunk(a), thunk(b)], node)
        if _is_T(node.func, "copy"):
            node.args = [self._region(a) for a in node.args]
            for kw in node.keywords:
                if kw.arg in ("src", "dst"):
                    kw.value = self._region(kw.value)
        elif _is_tile(node.func) or (_is_T(node.func) and node.func.attr.startswith("reduce_")):
            node.args = [self._operand(a) for a in node.args]
            for kw in node.keywords:
                kw.value = self._operand(kw.value)
        return node

    def visit_Assign(self, node):  # noqa: N802
        self.generic_visit(node)
        v = node.value
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(v, ast.Call)
                and _is_T(v.func) and v.func.attr.startswith("alloc_")):
            namer = _sim_call("named", [ast.Constant(node.targets[0].id)], v)
            node.value = ast.copy_location(ast.Call(namer, [v], []), v)
        return node

    @staticmethod
    def _region(e, fn="region"):
        if not isinstance(e, ast.Subscript):
            return e
        elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        conv = []
        for x in elts:
            if isinstance(x, ast.Slice):
                parts = [p if p is not None else ast.Constant(None) for p in (x.lower, x.upper, x.step)]
                conv.append(ast.copy_location(ast.Call(ast.Name("__sim_slice", ast.Load()), parts, []), e))
            else:
                conv.append(x)
        return _sim_call(fn, [e.value, ast.copy_location(ast.Tuple(conv, ast.Load()), e)], e)

    @classmethod
    def _operand(cls, e):
        """An argument of T.tile.* / T.reduce_*: `a[r, :]` (a slice) is a BufferRegion, `a[r]` a BufferLoad."""
        if not isinstance(e, ast.Subscript):
            return e
        elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        sliced = any(isinstance(x, ast.Slice) or (isinstance(x, ast.Constant) and x.value is Ellipsis) for x in elts)
        return cls._region(e, "region_arg" if sliced else "load_arg")


class _BothVectorCores(ast.NodeTransformer):
    """`with T.Scope("V"): ...` -> `for vid in __sim__.vector_cores(): with T.Scope("V"): ...` (910B), `vid` the
    name the kernel binds in `with T.Kernel(n, is_npu=True) as (cid, vid)`."""

    def __init__(self, vid: str = "vid"):
        self.vid = vid

    @staticmethod
    def vector_core_name(func: ast.FunctionDef) -> str:
        for node in ast.walk(func):
            if isinstance(node, ast.With) and len(node.items) == 1:
                item = node.items[0]
                if (isinstance(item.context_expr, ast.Call) and _is_T(item.context_expr.func, "Kernel")
                        and isinstance(item.optional_vars, ast.Tuple) and len(item.optional_vars.elts) == 2
                        and isinstance(item.optional_vars.elts[1], ast.Name)):
                    return item.optional_vars.elts[1].id
        return "vid"

    def visit_With(self, node):  # noqa: N802
        self.generic_visit(node)
        call = node.items[0].context_expr if len(node.items) == 1 else None
        if not (isinstance(call, ast.Call) and _is_T(call.func, "Scope") and call.args
                and isinstance(call.args[0], ast.Constant) and call.args[0].value == "V"):
            return node
        cores = ast.Call(ast.Attribute(ast.Name("__sim__", ast.Load()), "vector_cores", ast.Load()), [], [])
        return ast.copy_location(ast.For(ast.Name(self.vid, ast.Store()), cores, [node], []), node)


def _prepare(text: str, target: str):
    tree = ast.parse(text, FILENAME)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                _is_T(d) or (isinstance(d, ast.Call) and _is_T(d.func)) for d in node.decorator_list):
            if target == "ascend-910b":
                _BothVectorCores(_BothVectorCores.vector_core_name(node)).visit(node)
            _Rewriter().visit(node)
    ast.fix_missing_locations(tree)
    return compile(tree, FILENAME, "exec")
