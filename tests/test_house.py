"""The house rules of docs/architecture.md that a reader relies on: no module of the package
is over 1,000 lines (a file that grows past it is split along its seams into a package)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kernelforms"
MAX_LINES = 1000


def test_no_module_is_over_1000_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these along their seams: {long}"
