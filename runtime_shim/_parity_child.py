"""Child process of `runtime_shim.parity.check_index_width` (not a public entry point)."""

import json
import sys

from runtime_shim.parity import _child_main

if __name__ == "__main__":
    _child_main(json.loads(sys.argv[1]))
