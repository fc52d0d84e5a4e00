"""kvlint: lint and migrate code for token-major KV-cache pools."""
__version__ = "0.1.0"
# The name on PyPI: `kvlint` there is an unrelated prefix-cache log linter.
DISTRIBUTION = "kvlint-tokenmajor"
