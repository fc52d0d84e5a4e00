from kvlint.cli import entry

entry()
