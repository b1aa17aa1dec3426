"""Provenance: a result's key is the hash of what its computation read.

The code part of a key is found, not listed. A key names its entry points
(``bugzoo.harness.runner:execute_and_store``, a whole module ``bugzoo.models.mlp``), and the
package's source is followed from them by name: each top-level function, class or assignment
an included definition refers to, in its own module or through an import of a ``bugzoo``
module, joins the key, and so on transitively. What joins is the definition's normalised
code, parsed and printed again with docstrings dropped, so comments, docstrings, blank lines
and line breaks never move a key, while any change of what the code does does. Imports are
followed, not hashed; an outside name a definition uses (``F`` for
``torch.nn.functional``) is hashed as what it is bound to.

What is reached only by a name held in data (a plug-in looked up by id, a module imported by
``importlib``) is not found this way: a result names such code among its entry points, as a
run names its bug, model and data generator. Blocks under ``if TYPE_CHECKING:`` never run and
are not followed. Data files join a key through :func:`data_digest` (YAML as the values it
loads to).
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bugzoo.paths import PACKAGE

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's where built with it
Unit = tuple[str, str]  # (module, top-level name); name "" for the module's own statements


def key_of(*parts: object) -> str:
    """One short hash of JSON-able ``parts``."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def data_digest(*paths: Path) -> str:
    """One hash of data files (folders: their ``.yaml`` files, by relative path). YAML is hashed
    as the values it loads to, so its comments and layout never move a key."""
    parts = []
    for path in paths:
        files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            name = str(file.relative_to(path)) if path.is_dir() else file.name
            text = file.read_text()
            parts.append([name, yaml.load(text, Loader=_LOADER) if file.suffix == ".yaml"
                          else text])
    return key_of(parts)


class _NoDocstrings(ast.NodeTransformer):
    """Drops docstrings and, where asked, keyword arguments of the given names."""

    def __init__(self, cut_keywords: frozenset[str]) -> None:
        self.cut_keywords = cut_keywords

    def _strip(self, node: ast.AST) -> ast.AST:
        if node.body and _is_bare_string(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Module = _strip

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.keywords = [kw for kw in node.keywords if kw.arg not in self.cut_keywords]
        return self.generic_visit(node)


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING", "typing.TYPE_CHECKING")


def _is_bare_string(node: ast.stmt) -> bool:
    """A docstring, or any string standing alone as a statement: it does nothing."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
        node.value.value, str)


def _bound_names(node: ast.stmt) -> list[str]:
    """The top-level names a statement binds (not imports: those are followed, not hashed)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = {ast.Assign: lambda n: n.targets, ast.AnnAssign: lambda n: [n.target],
               ast.AugAssign: lambda n: [n.target]}.get(type(node))
    if targets:
        return [n.id for t in targets(node) for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
        return [name for child in node.body for name in _bound_names(child)]
    return []


@dataclass(frozen=True)
class _Uses:
    """What one top-level statement refers to: names used on their own, ``name.attribute``
    pairs, and the keyword arguments of its calls. A name seen only before an attribute
    (``store.add``) is not used on its own: that reaches ``add``, not all of ``store``."""

    names: frozenset[str]
    attributes: frozenset[tuple[str, str]]
    keywords: frozenset[str]

    def every_name(self) -> set[str]:
        """Each name the statement refers to, on its own or before an attribute."""
        return {*self.names, *(name for name, _ in self.attributes)}


def _uses(node: ast.stmt) -> _Uses:
    names, attributes, keywords, bases = set(), set(), set(), set()
    for ref in ast.walk(node):  # an Attribute is walked before the Name it holds
        if isinstance(ref, ast.Name) and id(ref) not in bases:
            names.add(ref.id)
        elif isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name):
            attributes.add((ref.value.id, ref.attr))
            bases.add(id(ref.value))
        elif isinstance(ref, ast.keyword) and ref.arg:
            keywords.add(ref.arg)
    return _Uses(frozenset(names), frozenset(attributes), frozenset(keywords))


@dataclass
class _Module:
    """One parsed module: its definitions by name, its statements that bind nothing, what its
    imports bind each name to, and what each statement uses."""

    name: str
    is_package: bool
    definitions: dict[str, list[ast.stmt]] = field(default_factory=dict)
    statements: list[ast.stmt] = field(default_factory=list)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    uses: dict[int, _Uses] = field(default_factory=dict)  # by id() of the statement


@dataclass(frozen=True, eq=False)
class Codebase:
    """The source of one package below ``root`` (``root/<package>/...``), read once: the
    default is the installed bugzoo; a test reads an edited copy with a new one."""

    root: Path = PACKAGE.parent
    package: str = "bugzoo"
    # what names and stamps results is about them, not part of them: never followed
    unfollowed: tuple[str, ...] = ("bugzoo.provenance", "bugzoo.release")
    # the version names what made a result (stamps, cache folders), and the code it names is
    # hashed itself: a version bump alone moves no key
    unfollowed_definitions: tuple[Unit, ...] = (("bugzoo", "__version__"),)

    def key(self, *entries: str, cut_keywords: Iterable[str] = ()) -> str:
        """The hash of the code reached from ``entries`` (``module`` or ``module:name``);
        keyword arguments named in ``cut_keywords`` are left out of every call (a bug's export
        deltas make scripts, never runs)."""
        return self._key(entries, frozenset(cut_keywords))

    @functools.cache  # noqa: B019
    def _key(self, entries: tuple[str, ...], cut: frozenset[str]) -> str:
        return key_of([[module, name, self._text(module, name, cut)]
                       for module, name in sorted(self.reached(*entries))])

    def reached(self, *entries: str) -> set[Unit]:
        """Every definition the code at ``entries`` reaches, as ``(module, name)``."""
        return set().union(*(self._reached_from(entry) for entry in entries))

    @functools.cache  # noqa: B019
    def _reached_from(self, entry: str) -> frozenset[Unit]:
        seen: set[Unit] = set()
        todo = self._entry_units(entry)
        while todo:
            unit = todo.pop()
            if unit in seen or unit in self.unfollowed_definitions:
                continue
            seen.add(unit)
            todo += self._references(unit)
        return frozenset(seen)

    def modules(self) -> list[str]:
        """Every module of the package, by dotted name."""
        base = self.root / self.package
        names = (".".join(p.relative_to(self.root).with_suffix("").parts) for p in
                 sorted(base.rglob("*.py")))
        return [name.removesuffix(".__init__") for name in names]

    # ------------------------------------------------------------------ reading the source
    def _path(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
        return None

    def _is_module(self, name: str) -> bool:
        return (name == self.package or name.startswith(self.package + ".")) and \
            self._path(name) is not None

    @functools.cache  # noqa: B019 - a few Codebases per process, each cached whole
    def _parsed(self, module: str) -> _Module:
        path = self._path(module)
        if path is None:
            raise KeyError(f"no module {module} under {self.root}")
        parsed = _Module(module, path.name == "__init__.py")
        tree = ast.parse(path.read_text())
        todo: list[ast.AST] = [tree]
        while todo:  # one pass, each node seen before its children: docstrings out, imports read
            node = todo.pop()
            if _is_type_checking(node):
                node.body = []
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                    _is_bare_string(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                parsed.imports.update(self._bindings(parsed, node))
            todo.extend(ast.iter_child_nodes(node))
        for node in tree.body:
            if _is_bare_string(node) or _is_type_checking(node) or isinstance(
                    node, (ast.Import, ast.ImportFrom)):
                continue
            parsed.uses[id(node)] = _uses(node)
            names = _bound_names(node)
            for name in names:
                parsed.definitions.setdefault(name, []).append(node)
            if not names:
                parsed.statements.append(node)
        return parsed

    def _bindings(self, module: _Module, node: ast.Import | ast.ImportFrom
                  ) -> dict[str, tuple[str, str | None]]:
        """What an import binds: name -> (module, attribute or None for the module itself)."""
        if isinstance(node, ast.Import):
            return {(a.asname or a.name.split(".")[0]): (a.name if a.asname else
                                                         a.name.split(".")[0], None)
                    for a in node.names}
        source = node.module or ""
        if node.level:
            here = module.name.split(".")
            here = here if module.is_package else here[:-1]
            base = here[:len(here) - node.level + 1]
            source = ".".join([*base, *([source] if source else [])])
        out = {}
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            out[alias.asname or alias.name] = (sub, None) if self._is_module(sub) else (
                source, alias.name)
        return out

    # ------------------------------------------------------------------ following names
    def _entry_units(self, entry: str) -> list[Unit]:
        module, _, name = entry.partition(":")
        parsed = self._parsed(module)
        if name and name not in parsed.definitions:
            raise KeyError(f"{module} defines no {name}")
        return [(module, name)] if name else self._whole(module)

    def _whole(self, module: str) -> list[Unit]:
        return [(module, ""), *((module, name) for name in self._parsed(module).definitions)]

    def _nodes(self, unit: Unit) -> list[ast.stmt]:
        parsed = self._parsed(unit[0])
        return parsed.statements if not unit[1] else parsed.definitions[unit[1]]

    @functools.cache  # noqa: B019
    def _references(self, unit: Unit) -> list[Unit]:
        module = self._parsed(unit[0])
        found: list[Unit] = [(unit[0], "")] if unit[1] else []  # a module's statements run
        for node in self._nodes(unit):
            uses = module.uses[id(node)]
            for name, attribute in uses.attributes:
                found += self._resolve(module, name, attribute)
            for name in uses.names:
                found += self._resolve(module, name, None)
        return found

    def _resolve(self, module: _Module, name: str, attribute: str | None) -> list[Unit]:
        """What ``name`` (``name.attribute``) means in ``module``, as units of the package."""
        if name in module.definitions:
            return [(module.name, name)]
        if name not in module.imports:
            return []
        source, imported = module.imports[name]
        if not self._is_module(source) or source in self.unfollowed:
            return []
        if imported is None:  # a module: name.attribute where it can, else all of it
            if attribute and attribute in self._parsed(source).definitions:
                return [(source, attribute), (source, "")]
            if attribute and self._is_module(f"{source}.{attribute}"):
                return self._whole(f"{source}.{attribute}")
            return self._whole(source)
        return self._resolve_in(source, imported)

    def _resolve_in(self, module: str, name: str) -> list[Unit]:
        """``name`` as ``module`` exports it: its own definition, or where it imported it."""
        if module in self.unfollowed:
            return []
        parsed = self._parsed(module)
        if name in parsed.definitions:
            return [(module, name)]
        if name in parsed.imports:
            source, imported = parsed.imports[name]
            if not self._is_module(source):
                return [(module, "")]
            return self._whole(source) if imported is None else self._resolve_in(source,
                                                                                  imported)
        return self._whole(module)  # made at run time (a module __getattr__): all of it

    @functools.cache  # noqa: B019
    def _text(self, module: str, name: str, cut: frozenset[str]) -> str:
        """The unit's normalised code, then what the outside names it uses are bound to."""
        parsed = self._parsed(module)
        nodes = self._nodes((module, name))
        uses = [parsed.uses[id(node)] for node in nodes]
        if any(cut & use.keywords for use in uses):
            nodes = [_NoDocstrings(cut).visit(copy.deepcopy(node)) for node in nodes]
            uses = [_uses(node) for node in nodes]
        body = ast.Module(body=list(nodes), type_ignores=[])
        used = {ref for use in uses for ref in use.every_name()}
        outside = sorted(f"{local}={source}:{imported}" for local, (source, imported) in
                         parsed.imports.items()
                         if local in used and not self._is_module(source))
        return "\n".join([ast.unparse(body), *outside])


CODE = Codebase()


def code_key(*entries: str, cut_keywords: Iterable[str] = ()) -> str:
    """:meth:`Codebase.key` of the installed package."""
    return CODE.key(*entries, cut_keywords=cut_keywords)


def code_reached(*entries: str) -> set[Unit]:
    """:meth:`Codebase.reached` in the installed package."""
    return CODE.reached(*entries)
