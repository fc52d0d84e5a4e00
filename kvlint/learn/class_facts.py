"""What a pool class's own code says of its instances: the keywords its constructor takes, the
methods it defines, and what each `self.<attribute>` is built as.

A call handing a door a loc reaches the definitions of the classes its receiver can be. Where the
receiver is an attribute a composite pool builds from a class it was handed
(`self.full_kv_pool = full_kv_pool_class(size=size, dtype=dtype, ...)`), the class is not named, but
the call still says something: only a class whose constructor takes those keywords can be built
so. The unified pools' constructors take a unified buffer, keyword-only, and no size, so a
composite building its sub-pools by size never holds one (`kvlint.analysis.exact_receivers`).

Read for the classes of the doors' hierarchy. An attribute is built:

* `exact`: as `C(...)`, a class named by its capitalized name;
* `typed`: as annotated (`self.pool: Optional[P] = None`), or from a parameter annotated so: `P`
  or any subclass;
* `keywords`: by calling a parameter that holds a class (annotated `type`/`Type[...]`, or
  defaulting to a class) or a local taking only such parameters and class names (`cls = a or b`),
  with the keywords the call passes;
* anything else (a function's return, a value kvlint cannot read) makes it unknown.

`None` builds nothing. A decorated class, one with a metaclass, or one defining `__new__` may be
built with anything: its constructor is taken as open.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import replace
from typing import Iterator, Optional, Union

from kvlint.analysis.receivers import annotated_classes
from kvlint.api.class_facts import AccessorRead, AttributeBuild, ClassFacts
from kvlint.learn.accessor_reads import accessor_reads
from kvlint.learn.doors import called_name
from kvlint.learn.memo import remembered
from kvlint.learn.scope import Scope
from kvlint.learn.tree import module_classes, names_spelled, parsed_tree

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def learn_class_facts(scope: Scope, names: tuple[str, ...], accessors: tuple[str, ...]) -> tuple[ClassFacts, ...]:
    """The facts of each class of `names` the tree defines (a name it does not, `ABC`, has none), with
    how it reads each buffer accessor of `accessors` it defines, and each method of its own those are
    read through. A name defined twice may be either: its constructor takes anything, its attributes
    are unknown, each method reads as either definition does, and no method of it is taken to
    override one above it."""
    found: dict[str, list[ClassFacts]] = {}
    for facts in scope.survey(class_facts, tuple(sorted(names)), accessors).values():
        for fact in facts:
            found.setdefault(fact.name, []).append(fact)
    # Of each class's method reads, those of the accessors and of the methods they are read through.
    reads = [read for facts in found.values() for fact in facts for read in fact.accessors]
    needed, more = set(accessors), set(accessors)
    while more:
        more = {helper for read in reads if read.name in more for helper in (*read.helpers, *read.through)} - needed
        needed |= more
    found = {name: [replace(fact, accessors=tuple(read for read in fact.accessors if read.name in needed))
                    for fact in facts] for name, facts in found.items()}
    learned = [facts[0] if len(facts) == 1 else ClassFacts(name, None, True, (), (AttributeBuild("*", unknown=True),),
                                                           _either(facts))
               for name, facts in sorted(found.items())]
    # Only an attribute some class builds as classes of the hierarchy can answer what a receiver is;
    # the contract travels with every file checked, so the others are left out, and a class's
    # unreadable build of one of those is kept as unknown.
    hierarchy = set(names)
    answering = {build.attribute for facts in learned for build in facts.attributes
                 if not build.unknown and hierarchy.issuperset((*build.exact, *build.typed))} - {"*"}
    # An attribute some code sets on an instance from outside (`pool.full_kv_pool = ...`) may be anything.
    answering -= {name for names in scope.survey(set_from_outside, tuple(sorted(answering))).values() for name in names}
    # Which class runs a method matters only for a name two classes define.
    defined = Counter(method for facts in learned for method in facts.methods)
    return tuple(replace(
        facts,
        methods=tuple(method for method in facts.methods if defined[method] > 1),
        attributes=tuple(
            build if build.attribute in answering and hierarchy.issuperset((*build.exact, *build.typed))
            else AttributeBuild(build.attribute, unknown=True)
            for build in facts.attributes if build.attribute in answering or build.attribute == "*"),
    ) for facts in learned)


def set_from_outside(data: bytes, attributes: tuple[str, ...]) -> tuple[str, ...]:
    """The attributes of `attributes` a file assigns on anything but `self` (`pool.swa_kv_pool = p`)."""
    wanted = names_spelled(data, attributes)
    if not wanted:
        return ()
    pattern = re.compile(rb"\.(" + b"|".join(re.escape(name.encode()) for name in wanted) + rb")\s*=(?!=)")
    found = set()
    for match in pattern.finditer(data):
        before = data[max(0, match.start() - 5):match.start()]
        joined = before[:1].isalnum() or before[:1] == b"_"
        owner_is_self = before.endswith(b"self") and (len(before) == 4 or not joined)
        if not owner_is_self:
            found.add(match.group(1).decode())
    return tuple(sorted(found))


def _either(definitions: list[ClassFacts]) -> tuple[AccessorRead, ...]:
    """The reads of a class defined twice: each method as either definition may read it."""
    reads: dict[str, list[AccessorRead]] = {}
    for facts in definitions:
        for read in facts.accessors:
            reads.setdefault(read.name, []).append(read)
    return tuple(AccessorRead(name, tuple(sorted({pool for read in both for pool in read.pools})),
                              tuple(sorted({helper for read in both for helper in read.helpers})),
                              tuple(sorted({name for read in both for name in read.inherited})),
                              tuple(sorted({name for read in both for name in read.through})),
                              any(read.unknown for read in both) or len(both) < len(definitions))
                 for name, both in sorted(reads.items()))


def class_facts(data: bytes, names: tuple[str, ...], accessors: tuple[str, ...]) -> tuple[ClassFacts, ...]:
    """The facts of each class of `names` a file defines, with how each method it defines hands over the
    buffer `accessors`; remembered by content."""
    # Only the files defining one: the names (`KVCache`, `ABC`) are spelled in hundreds more.
    wanted = tuple(name for name in names_spelled(data, names) if f"class {name}".encode() in data)
    if not wanted:
        return ()
    return tuple(remembered("class-facts", data, (wanted, accessors),
                            lambda: list(_read(data, set(wanted), frozenset(accessors)))))


def _read(data: bytes, wanted: set[str], accessors: frozenset[str]) -> Iterator[ClassFacts]:
    tree = parsed_tree(data)
    if tree is None:
        return
    for klass in (node for node in module_classes(tree.body) if node.name in wanted):
        methods = [item for item in klass.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
        init = next((method for method in methods if method.name == "__init__"), None)
        open_ = (bool(klass.decorator_list) or bool(klass.keywords)
                 or any(method.name == "__new__" for method in methods)
                 or (init is not None and init.args.kwarg is not None))
        yield ClassFacts(klass.name, _keywords(init) if init is not None else None, open_,
                         tuple(sorted({method.name for method in methods})), tuple(_builds(methods)),
                         accessor_reads(klass, accessors))


def _keywords(function: _Function) -> tuple[str, ...]:
    args = function.args
    return tuple(arg.arg for arg in (*args.args[1:], *args.kwonlyargs))


def _builds(methods: list[_Function]) -> Iterator[AttributeBuild]:
    found: dict[str, list[AttributeBuild]] = {}
    # What the class's own methods say they return: `self._side_pool(...)` is a `UnifiedDraftKVPool`.
    returns = {f"self.{method.name}()": annotated_classes(method.returns) for method in methods
               if method.returns is not None}
    for method in methods:
        walked = _Walked(method)
        if not walked.attributes:
            continue
        classes = walked.class_holders()
        typed = {**walked.typed_parameters(), **{call: named for call, named in returns.items() if named}}
        for node in walked.attributes:
            if isinstance(node, ast.Call):
                # `setattr(self, name, value)`: any attribute may be anything.
                found.setdefault("*", []).append(AttributeBuild("*", unknown=True))
            elif isinstance(node, ast.AnnAssign):
                # What the value is built as outweighs the annotation, read only where it says nothing.
                built = _build(_attribute(node.target), node.value, classes, typed) if node.value is not None else None
                if built is None or built.unknown:
                    built = AttributeBuild(_attribute(node.target), typed=tuple(sorted(annotated_classes(node.annotation))))
                found.setdefault(built.attribute, []).append(built)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if _attribute(target):
                        built = _build(_attribute(target), node.value, classes, typed)
                        found.setdefault(built.attribute, []).append(built)
            elif isinstance(node, ast.AugAssign):
                attribute = _attribute(node.target)
                found.setdefault(attribute, []).append(AttributeBuild(attribute, unknown=True))
    for attribute, builds in sorted(found.items()):
        yield AttributeBuild(
            attribute,
            tuple(sorted({name for build in builds for name in build.exact})),
            tuple(sorted({name for build in builds for name in build.typed})),
            tuple(sorted({keywords for build in builds for keywords in build.keywords})),
            any(build.unknown for build in builds),
        )


class _Walked:
    """One walk of a method: what sets `self.<attribute>`, and how its local names are bound."""

    def __init__(self, method: _Function) -> None:
        self.method = method
        self.attributes: list[ast.AST] = []
        self.assignments: dict[str, list[ast.expr]] = {}
        self.stored: set[str] = set()
        self.bound_otherwise: set[str] = set()
        for node in ast.walk(method):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.stored.add(node.id)
            if isinstance(node, ast.Assign):
                if any(_attribute(target) for target in node.targets):
                    self.attributes.append(node)
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assignments.setdefault(target.id, []).append(node.value)
                    else:
                        # Unpacked: what each name gets is not read.
                        self.bound_otherwise |= {name.id for name in ast.walk(target) if isinstance(name, ast.Name)}
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and _attribute(node.target):
                self.attributes.append(node)
            elif _sets_by_name(node):
                self.attributes.append(node)
            if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
                self.bound_otherwise |= {name.id for name in ast.walk(node)
                                         if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)}

    def class_holders(self) -> set[str]:
        """The parameters holding a class (annotated `type`/`Type[...]`, or defaulting to a class name)
        and the locals assigned only from those and class names (`cls = full_class or default_class`)."""
        args = self.method.args
        positional = [*args.posonlyargs, *args.args]
        defaulted = positional[len(positional) - len(args.defaults):]
        defaults: dict[str, ast.expr] = {arg.arg: default for arg, default in zip(defaulted, args.defaults)}
        defaults.update({arg.arg: value for arg, value in zip(args.kwonlyargs, args.kw_defaults) if value is not None})
        holders = {arg.arg for arg in (*positional, *args.kwonlyargs)
                   if _names_type(arg.annotation) or _is_class_name(defaults.get(arg.arg))} - self.bound_otherwise
        for _round in range(3):
            for name, values in self.assignments.items():
                if name not in self.bound_otherwise and all(_of_classes(value, holders) for value in values):
                    holders.add(name)
                else:
                    holders.discard(name)
        return holders

    def typed_parameters(self) -> dict[str, set[str]]:
        """The parameters annotated with classes, but those the method binds again."""
        args = self.method.args
        every = (*args.posonlyargs, *args.args, *args.kwonlyargs)
        typed = {arg.arg: annotated_classes(arg.annotation) for arg in every if arg.annotation is not None}
        return {name: classes for name, classes in typed.items() if classes and name not in self.stored}


def _build(attribute: str, value: ast.expr, classes: set[str], typed: dict[str, set[str]]) -> AttributeBuild:
    if isinstance(value, ast.Constant) and value.value is None:
        return AttributeBuild(attribute)
    if isinstance(value, ast.IfExp):
        one, other = _build(attribute, value.body, classes, typed), _build(attribute, value.orelse, classes, typed)
        return AttributeBuild(attribute, one.exact + other.exact, one.typed + other.typed,
                              one.keywords + other.keywords, one.unknown or other.unknown)
    if isinstance(value, ast.Call):
        callee = called_name(value.func) or ""
        if isinstance(value.func, ast.Name) and callee in classes:
            # `**kwargs` may pass more; the keywords it names must be taken all the same.
            return AttributeBuild(attribute, keywords=(tuple(sorted(k.arg for k in value.keywords if k.arg)),))
        if callee[:1].isupper():
            return AttributeBuild(attribute, exact=(callee,))
        if _attribute(value.func) and f"self.{callee}()" in typed:
            return AttributeBuild(attribute, typed=tuple(sorted(typed[f"self.{callee}()"])))
        return AttributeBuild(attribute, unknown=True)
    if isinstance(value, ast.Name) and value.id in typed:
        return AttributeBuild(attribute, typed=tuple(sorted(typed[value.id])))
    return AttributeBuild(attribute, unknown=True)


def _of_classes(value: ast.expr, holders: set[str]) -> bool:
    if isinstance(value, ast.BoolOp):
        return all(_of_classes(part, holders) for part in value.values)
    if isinstance(value, ast.IfExp):
        return _of_classes(value.body, holders) and _of_classes(value.orelse, holders)
    return (isinstance(value, ast.Name) and value.id in holders) or _is_class_name(value)


def _names_type(annotation: Optional[ast.expr]) -> bool:
    if annotation is None:
        return False
    return any(isinstance(node, ast.Name) and node.id in ("type", "Type") for node in ast.walk(annotation))


def _is_class_name(node: Optional[ast.expr]) -> bool:
    return node is not None and (called_name(node) or "")[:1].isupper()


def _sets_by_name(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
            and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"
            and not isinstance(node.args[1], ast.Constant))


def _attribute(target: ast.expr) -> str:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return ""
