"""What a pool class's own code says of its instances (learned by `kvlint.learn.class_facts`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class AttributeBuild:
    """How one class's methods build `self.<attribute>`."""

    attribute: str
    exact: tuple[str, ...] = ()
    typed: tuple[str, ...] = ()
    # The keywords of each call of a class held in a variable.
    keywords: tuple[tuple[str, ...], ...] = ()
    unknown: bool = False


@dataclass(frozen=True)
class AccessorRead:
    """How a method of a pool class (a buffer accessor, or a method one uses) hands over buffers: to
    the pools its `pools` attributes hold, through the methods of its own it uses (`helpers`, as the
    instance's class defines them), to the definitions above it of the methods it calls on
    `super()` (`inherited`); where it names none of those, it reads the class's own attributes.
    `through`: the methods of its class whose returns named the pools (as this class defines them,
    so a subclass defining one again may hold others). `unknown`: some part kvlint cannot read."""

    name: str
    pools: tuple[str, ...] = ()
    helpers: tuple[str, ...] = ()
    inherited: tuple[str, ...] = ()
    through: tuple[str, ...] = ()
    unknown: bool = False


@dataclass(frozen=True)
class ClassFacts:
    name: str
    # The parameters its own `__init__` takes by keyword; None where it defines none.
    init: Optional[tuple[str, ...]]
    # `**kwargs`, a decorator, a metaclass or `__new__`: it may be built with any keyword.
    init_open: bool
    methods: tuple[str, ...]
    attributes: tuple[AttributeBuild, ...]
    # How each buffer accessor it defines reads (`kvlint.learn.accessor_reads`).
    accessors: tuple[AccessorRead, ...] = ()
