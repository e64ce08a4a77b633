"""Finds the private names of imaplib, imapclient and Textual used outside their adapter.

A library's private names (`_command`, `_imap`, `_on_idle`, ...) may change in any
release; each library touched that way has one adapter module, the only place allowed to
use them, so an upgrade breaks in one place. Read from the source (ast), four uses:

- an import of a private module or name (`textual._context`, `from x import _y`);
- in a class derived from a library class (directly or through ours), a method or a
  `self` attribute that the library's classes in its MRO define or set (an override of
  `Screen._on_idle`, a clobbered `self._size`), read or written on `self` or `super()`;
- `x._n` where `x` is typed as a library object (a parameter annotated `IMAPClient`)
  and the library's class defines or sets `_n`;
- `x._n` on anything when `_n` is a private name the library's source uses and our code
  defines nowhere (so it can only be someone else's: `client._imap`,
  `app._batch_count`), and imaplib's undocumented `untagged_responses`/`tagged_commands`.

Our own private names are left alone: a name our code defines (`def _command` in the
PostOffice clerk) is flagged only on a receiver known to be a library object.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LIBS = ("imaplib", "imapclient", "textual")
# Attributes without an underscore that imaplib documents nowhere: internals as well.
UNDOCUMENTED = {"untagged_responses": "imaplib", "tagged_commands": "imaplib"}


def private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    lib: str
    what: str


@cache
def class_names(qualname: str) -> frozenset[str]:
    """The private names the library class `qualname` and its library bases define
    (methods, class attributes) or set on `self`."""
    module, _, name = qualname.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return frozenset()
    if not isinstance(cls, type):
        return frozenset()
    out: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in LIBS:
            out |= _own_class_names(klass)
    return frozenset(out)


@cache
def _own_class_names(klass: type) -> frozenset[str]:
    """What one library class defines or sets on `self` (parsed once: Widget is the base
    of most classes asked about)."""
    out = {n for n in vars(klass) if private(n)}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError, SyntaxError):
        return frozenset(out)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_self(node.value) and private(node.attr):
            out.add(node.attr)
    return frozenset(out)


@cache
def library_names(lib: str) -> frozenset[str]:
    """Every private attribute or method name the library's source uses."""
    spec = importlib.util.find_spec(lib)
    if spec is None or spec.origin is None:
        return frozenset()
    origin = Path(spec.origin)
    files = origin.parent.rglob("*.py") if origin.name == "__init__.py" else [origin]
    out: set[str] = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and private(node.attr):
                out.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and private(node.name):
                out.add(node.name)
    return frozenset(out)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _lib_of(qualname: str) -> str | None:
    root = qualname.split(".")[0]
    return root if root in LIBS else None


class _Module:
    """One file: its imports of the libraries, and its classes' bases."""

    def __init__(self, path: Path, rel: str) -> None:
        self.rel = rel
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.nodes = list(ast.walk(self.tree))  # walked once: four passes read it
        self.aliases: dict[str, str] = {}  # local name -> qualified name (library ones)
        self.modules: set[str] = set()  # local names of other modules (os, sys, ...)
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    target = a.name if a.asname else a.name.split(".")[0]
                    if _lib_of(a.name):
                        self.aliases[local] = target
                    else:
                        self.modules.add(local)
            elif isinstance(node, ast.ImportFrom) and node.module and _lib_of(node.module):
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def qualname(self, node: ast.expr) -> str | None:
        """`imapclient.IMAPClient` for an expression naming a library object."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Subscript):  # Screen[object]
            return self.qualname(node.value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.qualname(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return None
        if isinstance(node, ast.BinOp):  # `IMAPClient | None`
            return self.qualname(node.left) or self.qualname(node.right)
        return None


def scan(files: Iterable[Path], root: Path, adapters: dict[str, set[str]]) -> list[Finding]:
    """The uses of a library's private names in `files` outside `adapters` (library ->
    the relative paths allowed to use its private names)."""
    modules = [_Module(f, f.relative_to(root).as_posix()) for f in sorted(files)]
    bases: dict[str, list[str]] = {}  # class name -> base names (qualified if a library's)
    for m in modules:
        for node in m.nodes:
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, []).extend(
                    m.qualname(b) or (b.id if isinstance(b, ast.Name) else "") for b in node.bases
                )

    def lib_bases(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        out: set[str] = set()
        for base in bases.get(name, []):
            if _lib_of(base):
                out.add(base)
            elif base and base not in seen:
                out |= lib_bases(base, seen | {name})
        return out

    ours = _our_names(modules, lib_bases)
    findings: list[Finding] = []
    for m in modules:
        allowed = {lib for lib, paths in adapters.items() if m.rel in paths}
        findings += [f for f in _check(m, lib_bases, ours) if f.lib not in allowed]
    return sorted(set(findings))


def _our_names(modules: list[_Module], lib_bases: object) -> frozenset[str]:
    """The private names our code defines (methods, attributes set, module names),
    leaving out the overrides of a library's."""
    out: set[str] = set()
    for m in modules:
        for node in m.nodes:
            if isinstance(node, ast.ClassDef):
                inherited = _inherited(node, lib_bases)
                out |= {
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and private(item.name)
                    and item.name not in inherited
                }
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and private(node.name):
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if private(node.attr) and _is_self(node.value):
                    out.add(node.attr)
            elif (
                isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and private(node.id)
            ):
                out.add(node.id)
    return frozenset(out)


def _inherited(cls: ast.ClassDef, lib_bases: object) -> frozenset[str]:
    names: set[str] = set()
    for base in lib_bases(cls.name):  # type: ignore[operator]
        names |= class_names(base)
    return frozenset(names)


def _check(m: _Module, lib_bases: object, ours: frozenset[str]) -> Iterator[Finding]:
    for node in m.nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _check_import(m, node)
    yield from _walk(m, m.tree, lib_bases, ours, None, {})


def _check_import(m: _Module, node: ast.Import | ast.ImportFrom) -> Iterator[Finding]:
    if isinstance(node, ast.Import):
        for a in node.names:
            lib = _lib_of(a.name)
            if lib and any(private(p) for p in a.name.split(".")):
                yield Finding(m.rel, node.lineno, lib, f"import {a.name}")
        return
    lib = _lib_of(node.module or "")
    if lib is None:
        return
    parts = (node.module or "").split(".")
    for a in node.names:
        if any(private(p) for p in [*parts, a.name]):
            yield Finding(m.rel, node.lineno, lib, f"from {node.module} import {a.name}")


def _walk(
    m: _Module,
    scope: ast.AST,
    lib_bases: object,
    ours: frozenset[str],
    cls: ast.ClassDef | None,
    typed: dict[str, str],
) -> Iterator[Finding]:
    """Check `scope`'s own statements; functions and classes get their own scope."""
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        typed = {**typed, **_typed_names(m, scope)}
    inherited = _inherited(cls, lib_bases) if cls is not None else frozenset()
    lib_of_cls = next(iter(lib_bases(cls.name)), "") if cls is not None else ""  # type: ignore[operator]
    for node in _own_nodes(scope):
        if isinstance(node, ast.ClassDef):
            yield from _walk(m, node, lib_bases, ours, node, {})
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if scope is cls and node.name in inherited:
                yield Finding(m.rel, node.lineno, _lib_of(lib_of_cls) or "", f"def {node.name}")
            yield from _walk(m, node, lib_bases, ours, cls, typed)
            continue
        if not isinstance(node, ast.Attribute):
            continue
        name, value = node.attr, node.value
        if name in UNDOCUMENTED:
            yield Finding(m.rel, node.lineno, UNDOCUMENTED[name], f".{name}")
        if not private(name):
            continue
        if (_is_self(value) or _is_super(value)) and name in inherited:
            yield Finding(m.rel, node.lineno, _lib_of(lib_of_cls) or "", f"self.{name}")
        elif isinstance(value, ast.Name) and value.id in typed:
            qual = typed[value.id]
            if name in class_names(qual) or name in library_names(_lib_of(qual) or ""):
                yield Finding(m.rel, node.lineno, _lib_of(qual) or "", f"{value.id}.{name}")
        elif name not in ours and not (isinstance(value, ast.Name) and value.id in m.modules):
            for lib in LIBS:
                if name in library_names(lib):
                    yield Finding(m.rel, node.lineno, lib, f".{name}")
                    break


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `scope`, not descending into nested functions or classes (they are
    yielded, for the caller to walk as scopes of their own)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _typed_names(m: _Module, func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """The local names of `func` known to hold a library object: parameters and
    variables annotated with a library class, and what a library class's call returns."""
    out: dict[str, str] = {}
    args = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
    for arg in args:
        qual = m.qualname(arg.annotation) if arg.annotation is not None else None
        if qual:
            out[arg.arg] = qual
    for node in _own_nodes(func):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            qual = m.qualname(node.annotation)
            if qual:
                out[node.target.id] = qual
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            if isinstance(node.context_expr, ast.Call):
                qual = m.qualname(node.context_expr.func)
                if qual:
                    out[node.optional_vars.id] = qual
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            qual = m.qualname(node.value.func)
            if qual:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out[target.id] = qual
    return out
