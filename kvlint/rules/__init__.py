"""kvlint's rules: one module per rule, named after the rule's class."""
