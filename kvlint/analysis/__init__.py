"""The analysis layer: questions about one LibCST tree.

The module index (`index`), the reaching definitions of local names
(`dataflow`), where flagged nodes are (`locate`) and the cheap walk they share
(`walk`). Imports only the API layer.
"""
