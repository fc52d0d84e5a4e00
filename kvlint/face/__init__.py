"""The face: what a user touches. The click CLI (`cli`), the reporters, rule
documentation (`docs`), the fix summary (`fix_output`) and baselines.

It formats and wires; it decides nothing.
"""
