"""kvlint: lint and migrate code for token-major KV-cache pools."""
__version__ = "0.1.0"
