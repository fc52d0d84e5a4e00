"""kvlint's rules, one package per family; in a family, one module per rule, named after its class.

`kvlint.running.registry` finds them by walking these packages.
"""

# The code prefix each family's rules carry.
FAMILY_PREFIXES = {"write_loc": "KV1", "layout": "KV2", "tbo": "KV3"}
