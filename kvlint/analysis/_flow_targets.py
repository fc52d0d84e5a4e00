"""The names a binding target, a parameter list or a `case` pattern binds, read off LibCST nodes.

Shared by the data flow's statement walker (`kvlint.analysis.dataflow`) and its expression walker
(`kvlint.analysis._flow_expressions`).
"""

from __future__ import annotations

from typing import Iterator, Optional, Union

import libcst as cst


def for_clauses(clause: Optional[cst.CompFor]) -> Iterator[cst.CompFor]:
    while clause is not None:
        yield clause
        clause = clause.inner_for_in


def params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    yield from params.kwonly_params
    if params.star_kwarg is not None:
        yield params.star_kwarg


def names_in(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from names_in(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from names_in(target.value)


def captures(pattern: Union[cst.MatchPattern, cst.MatchStar]) -> Iterator[cst.Name]:
    """The names a `case` pattern binds."""
    if isinstance(pattern, cst.MatchAs):
        if pattern.pattern is not None:
            yield from captures(pattern.pattern)
        if pattern.name is not None:
            yield pattern.name
    elif isinstance(pattern, cst.MatchStar):
        if pattern.name is not None:
            yield pattern.name
    elif isinstance(pattern, cst.MatchOr):
        for element in pattern.patterns:
            yield from captures(element.pattern)
    elif isinstance(pattern, (cst.MatchSequence, cst.MatchList, cst.MatchTuple)):
        for item in pattern.patterns:
            yield from captures(item if isinstance(item, cst.MatchStar) else item.value)
    elif isinstance(pattern, cst.MatchMapping):
        for entry in pattern.elements:
            yield from captures(entry.pattern)
        if pattern.rest is not None:
            yield pattern.rest
    elif isinstance(pattern, cst.MatchClass):
        for positional in pattern.patterns:
            yield from captures(positional.value)
        for keyword in pattern.kwds:
            yield from captures(keyword.pattern)
