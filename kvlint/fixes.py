"""Errors of fix application; the application itself is `codemods._rule_fix`."""


class FixFailed(Exception):
    """A fix could not be applied (overlapping edits, a node that vanished)."""
