"""What the write-loc rules say of the API a fix calls, in the words of where the contract found it.

A fix is safe only where what it calls is stated: defined in the scanned tree or in the installed
engine the tree builds on, or pinned in the configuration (`Contract.has`); elsewhere it is unsafe
and the message names the gap and the key that closes it. Where nothing states the write-loc
class at all, its seed spelling (`id_space`, `for_batch`) is only kvlint's assumption: a message
says so, and how to tell kvlint otherwise, and never offers an assumed keyword or factory as the
fix (upstream SGLang spells the mark `physical`: an assumed `id_space=` is a `TypeError` there).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from kvlint.api.contract import Contract
from kvlint.api.rule import FileContext, Replacement
from kvlint.api.types import Applicability

# The keys naming the write-loc API, in the order a message lists them.
_CLASS_KEYS = ("write-loc-module", "mark", "batch-mark", "batch-factory")


def class_stated(contract: Contract) -> bool:
    """Whether the tree, the installed engine or the configuration states the write-loc class."""
    return contract.has("write-loc-module")


def mark_stated(contract: Contract) -> bool:
    """Whether the mark keyword is stated: only then may a message name it as what to write."""
    return contract.has("mark")


def the_mark(contract: Contract) -> str:
    """"the `physical` mark", or "the batch's mark" where its keyword is only assumed."""
    return f"the `{contract.mark}` mark" if mark_stated(contract) else "the batch's mark"


def factory_named(contract: Contract) -> str:
    """The batch factory call a message may suggest: by name only where it is stated."""
    if contract.has("batch-factory") and class_stated(contract):
        return f"`{contract.write_loc_class}.{contract.batch_factory}(...)`"
    return f"a `{contract.write_loc_class}` carrying the batch's mark"


def no_class(contract: Contract) -> str:
    """Why no write-loc class is known, what kvlint assumed instead, and the settings that tell it
    otherwise (a phrase that `gap_message` ends with "in [tool.kvlint.contract]")."""
    cls, package = contract.write_loc_class, contract.engine_package
    if contract.engine_not_found:
        where = f"neither the scanned tree nor an installed `{package}` defines `{cls}`"
    elif contract.engine:
        where = f"neither the scanned tree nor the installed `{package}` defines `{cls}`"
    else:
        where = f"the scanned tree defines no `{cls}`"
    unstated = [key for key in _CLASS_KEYS if not contract.has(key)]
    assumed = [f"`{contract.mark}` mark"] if "mark" in unstated else []
    assumed += [f"`{contract.batch_factory}` factory"] if "batch-factory" in unstated else []
    if assumed:
        where += f", so kvlint assumed the seed's {' and '.join(assumed)}"
    pin = f"pin {_listed([f'`{key}`' for key in unstated])}"
    if contract.engine_not_found:
        return f"{where} (set `engine-path` under [tool.kvlint] to {package}'s package folder, or {pin})"
    return f"{where} ({pin})"


def mark_unnamed(contract: Contract) -> str:
    """Why a message names no mark keyword, and how to state one."""
    if not class_stated(contract):
        return no_class(contract) + " in [tool.kvlint.contract]"
    return f"{_class_home(contract)} `{contract.write_loc_class}` has no mark field yet (pin `mark` in [tool.kvlint.contract])"


def api_gaps(ctx: FileContext, *keys: str) -> list[str]:
    """What a fix needing the APIs behind `keys` would call that nothing states, one phrase each,
    naming the contract key that pins it (empty: the tree or the engine has them all, or they are pinned)."""
    contract = ctx.contract
    if not class_stated(contract):
        # No class at all: the other gaps follow from it.
        return [no_class(contract)] if any(not contract.has(key) for key in keys) else []
    cls, home = contract.write_loc_class, _class_home(contract)
    batch_home = f"the installed `{contract.engine_package}`'s" if contract.engine else "the tree's"
    phrases = {
        "batch-factory": f"{home} `{cls}` has no `{contract.batch_factory}` (pin `batch-factory`)",
        "mark": f"{home} `{cls}` has no mark field such as `physical` or `id_space` (pin `mark`)",
        "batch-mark": f"{batch_home} batch class has no mark attribute (pin `batch-mark`)",
    }
    return [phrases[key] for key in keys if key in phrases and not contract.has(key)]


def made_unsafe(fix: Optional[Replacement], why: Optional[str]) -> Optional[Replacement]:
    """`fix` offered only with --unsafe, its description saying `why`; as it is where `why` is None."""
    if fix is None or why is None:
        return fix
    return replace(fix, applicability=Applicability.UNSAFE, description=f"{fix.description} (unsafe: {why})")


def with_gaps(fix: Optional[Replacement], gaps: Sequence[str]) -> Optional[Replacement]:
    """`fix` made unsafe where nothing states an API it calls."""
    return made_unsafe(fix, "; ".join(gaps) if gaps else None)


def gap_message(gaps: Sequence[str]) -> str:
    if not gaps:
        return ""
    return f"; the fix is unsafe here: {'; '.join(gaps)} in [tool.kvlint.contract]"


def lost_mark_phrase(ctx: FileContext) -> str:
    """What a raw loc loses, in the tree's (or its engine's) own words: its mark, and a door refusing
    it only where one does."""
    contract = ctx.contract
    cls = contract.write_loc_class
    if not class_stated(contract):
        if contract.engine_not_found:
            # The engine has a class kvlint could not read: the mark is lost whatever its keyword.
            return "the batch's mark is lost"
        if contract.engine:
            return f"neither the tree nor the installed `{contract.engine_package}` has a `{cls}` yet, so no mark travels with the loc"
        return f"the scanned tree has no `{cls}` yet, so no mark travels with the loc"
    if not mark_stated(contract):
        owner = "this tree's" if _class_home(contract) == "the tree's" else _class_home(contract)
        return f"{owner} `{cls}` has no mark field yet, so no mark travels with the loc"
    phrase = f"the batch's `{contract.mark}` mark is lost"
    if contract.door_checks_mark:
        phrase += ", and a write door that checks the mark refuses the loc"
    return phrase


def _class_home(contract: Contract) -> str:
    """Whose write-loc class the contract read: "the tree's", or "the installed `sglang`'s"."""
    if contract.origin("write-loc-class") == "engine":
        return f"the installed `{contract.engine_package}`'s"
    return "the tree's"


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
