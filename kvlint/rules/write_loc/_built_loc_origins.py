"""What the origins of the locs a `KVWriteLoc(...)` call wraps say of it (KV102): a loc the engine
leaves unmarked by design, and second locs a fix would move under the batch's mark."""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from kvlint.api.rule import FileContext, Replacement
from kvlint.rules.write_loc._api_words import made_unsafe
from kvlint.rules.write_loc._loc_origin import PLAN_WRITE_IDS, SEPARATE, UNKNOWN, call_site


def unmarked_by_design(ctx: FileContext, call: cst.Call, value: cst.BaseExpression) -> bool:
    """Whether the loc is one the engine wraps unmarked by design (`unmarked-loc-attributes`), directly,
    or through locals, a parameter the file's calls pass one, or a static buffer filled from one."""
    attributes = ctx.contract.unmarked_loc_attributes
    if not attributes:
        return False
    target = value.value if isinstance(value, cst.Subscript) else value
    if isinstance(target, cst.Attribute):
        if target.attr.value in attributes:
            return True
    elif not isinstance(target, cst.Name):
        return False
    origins, function, found = call_site(ctx, call)
    loc = _ast_loc(found) if found is not None else None
    return loc is not None and origins.by_design(loc, function)


def second_locs_checked(ctx: FileContext, call: cst.Call, fix: Replacement) -> tuple[Optional[Replacement], str]:
    """The fix, kept only where every second loc it moves under the batch's mark comes from the batch's
    plan (`for_batch`: "a loc produced separately states its own mark"); else why not, for the message."""
    if not any(arg.keyword is None or arg.keyword.value != "loc" for arg in call.args[1:]):
        return fix, ""
    origins, function, found = call_site(ctx, call)
    fields = ctx.contract.write_loc_fields
    extras = [] if found is None else [(fields[i], arg) for i, arg in enumerate(found.args) if 0 < i < len(fields)]
    extras += [(k.arg, k.value) for k in (found.keywords if found is not None else ()) if k.arg not in (None, "loc")]
    unknown = [] if extras else ["the second loc"]
    for field_name, expr in extras:
        origin = origins.second_loc(expr, function)
        if origin.kind == SEPARATE:
            how = "translated" if "translate" in origin.what else "produced"
            return None, (f"; `{field_name}` is {how} separately ({origin.what} at line {origin.line}), so it "
                          f"states its own mark (no fix: only its author knows it is in the batch's id space)")
        if origin.kind == UNKNOWN:
            unknown.append(f"`{field_name}`")
    if not unknown:
        return fix, ""
    message = (f"; {', '.join(unknown)} is not shown to come from the batch's plan (`{PLAN_WRITE_IDS}`), so "
               f"the fix, which puts it under the batch's mark, is unsafe")
    return made_unsafe(fix, f"{', '.join(unknown)} not shown to come from the batch's plan"), message


def _ast_loc(call: ast.Call) -> Optional[ast.expr]:
    for keyword in call.keywords:
        if keyword.arg == "loc":
            return keyword.value
    return call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
