"""Which file's class a name refers to, where the tree defines two classes of that name."""

from __future__ import annotations

import ast
from pathlib import Path

from kvlint.learn.name_sources import OWN, ModuleFiles, name_sources


def test_a_file_binds_a_name_by_its_own_class_or_one_import_wherever_it_sits() -> None:
    source = (
        "from .backends import Local\n"
        "class Own:\n    pass\n"
        "def build():\n    from pkg.sub.backends import Deep\n    return Deep()\n"
        "try:\n    from a import Twice\nexcept ImportError:\n    from b import Twice\n"
        "from c import Renamed as Other\n"
    )
    assert name_sources(ast.parse(source), ["Local", "Own", "Deep", "Twice", "Renamed", "Other", "Absent"]) == {
        "Local": ".backends", "Own": OWN, "Deep": "pkg.sub.backends"}


def test_module_files_resolve_relative_and_absolute_sources_to_one_file_or_none() -> None:
    files = ModuleFiles([Path("eng/backends.py"), Path("eng/diffusion/backends.py"), Path("eng/diffusion/__init__.py"),
                         Path("other/eng/backends.py")])
    platform = Path("eng/diffusion/platform.py")
    assert files.file_of(platform, ".backends") == Path("eng/diffusion/backends.py")
    assert files.file_of(platform, "..backends") == Path("eng/backends.py")
    assert files.file_of(platform, "eng.diffusion.backends") == Path("eng/diffusion/backends.py")
    assert files.file_of(platform, "eng.diffusion") == Path("eng/diffusion/__init__.py")
    assert files.file_of(platform, OWN) == platform
    # The shallowest file ending so: `backends` is not a subpackage's module while one sits above it.
    assert files.file_of(platform, "eng.backends") == Path("eng/backends.py")
    assert files.file_of(platform, "missing.backends") is None
    # Two files as shallow: which one the import means is not known.
    assert ModuleFiles([Path("a/m.py"), Path("b/m.py")]).file_of(platform, "m") is None
