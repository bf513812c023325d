"""Write src/apron/frozen_shapes.py: the `__init__` template of every shape the package's frozen
classes have (apron/frozen.py template_source), as plain functions, so that Python's bytecode cache
compiles them once instead of every start of `apron plan`. Run it after adding a frozen class of a new
shape (tests/test_frozen.py says when): `python scripts/frozen_shapes.py`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from apron.frozen import shape_function_name, template_source  # noqa: E402
from frozen_package import package_shapes  # noqa: E402  (tests/frozen_package.py)

TARGET = ROOT / "src" / "apron" / "frozen_shapes.py"
HEADER = '''"""The `__init__` templates of the package's frozen classes, one function per shape (apron/frozen.py
template_source), written by scripts/frozen_shapes.py: the import system caches their bytecode, where
compiling them at every start took ~3.5 ms of `apron plan`. tests/test_frozen.py checks that these are
exactly the package's shapes and the code template_source compiles to. Not called as written: apron/frozen.py
takes each function's code and gives it a class's field names and defaults.
"""

# ruff: noqa: F821  (_set, _FACTORY, _d0, _f0, ... are the names frozen.py binds for each class)
'''


def module_text(shapes: list[str]) -> str:
    functions = [template_source(shape, shape_function_name(shape)) for shape in shapes]
    table = "".join(f"    {shape!r}: {shape_function_name(shape)},\n" for shape in shapes)
    return HEADER + "\n\n" + "\n\n".join(functions) + "\n\nSHAPES = {\n" + table + "}\n"


def main() -> int:
    shapes = package_shapes()
    TARGET.write_text(module_text(shapes))
    # the house's format (ruff, from this venv): the checks compare code, not text
    subprocess.run([str(Path(sys.executable).with_name("ruff")), "format", "-q", str(TARGET)], check=True)
    print(f"wrote {len(shapes)} shapes to {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
