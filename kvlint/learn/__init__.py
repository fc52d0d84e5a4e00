"""What kvlint learns of a tree: the contract in force, the write doors, the pool gate.

`contract` fills the contract's "auto" values from the tree (the write-loc class, the
batch mark, the factories, the paged helpers: `classes`), `doors` learns write doors
from what a pool does with its loc, `gate` which pools take a bare loc by design,
`binding` which functions bind a batch's mark (KV105). `installed_engine` locates the
installed engine a tree builds on without containing it (a plugin), whose source
learning reads as context.
`tree` reads class hierarchies, allocations and import spellings across the tree,
`scope` records which files learning read and what it asked of each, and `memo`
remembers what was read of a piece of a file by its digest.

Imports the API and `kvlint.processes`; never the run, the store or the rules.
"""
