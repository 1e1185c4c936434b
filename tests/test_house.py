"""The house rules of docs/architecture.md that a reader relies on: no module of the package
is over 1,000 lines (a file that grows past it is split along its seams into a package), and
no layer reads a typed Result field by its name from ``extras``."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kernelforms"
MAX_LINES = 1000


def test_no_module_is_over_1000_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these along their seams: {long}"


#: names format 1 of the report JSON used in "extras" for typed fields (read only by
#: report/files.py, from files)
OLD_NAMES = ("edge_multipliers", "gap_tol_from_rtol")


def _extras_key_sites(text: str, names) -> list[str]:
    """``extras[name]``, ``extras.get(name ...)``, ``.pop``, ``.setdefault`` and
    ``name in ....extras`` for a quoted name of ``names``."""
    alt = "|".join(map(re.escape, names))
    pat = re.compile(r"""extras\s*(?:\[|\.(?:get|pop|setdefault)\()\s*["'](%s)["']"""
                     r"""|["'](%s)["']\s+(?:not\s+)?in\s+[\w.()\[\]]*extras\b""" % (alt, alt))
    return [m.group(0) for m in pat.finditer(text)]


def test_no_layer_reads_a_typed_field_from_extras():
    from kernelforms.result import RESULT_FIELDS

    names = RESULT_FIELDS + OLD_NAMES
    # the check can fail: each shape of a read is caught
    assert len(_extras_key_sites("""res.extras["multipliers"]; out.extras.get('rank_path', 0)
        r.extras.pop("lower_bound"); "solves" in r.extras; "edge_multipliers" not in res.extras""",
                                 names)) == 5
    found = {str(p.relative_to(PACKAGE)): sites for p in sorted(PACKAGE.rglob("*.py"))
             if (sites := _extras_key_sites(p.read_text(encoding="utf-8"), names))}
    assert found == {}, ("a typed Result field read from extras (use the field; a value another "
                         f"layer reads is a field of Result / Solution): {found}")
