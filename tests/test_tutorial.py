"""docs/tutorial.md runs as written: its ```python blocks are executed in order in one
namespace, and each ```text exact block must equal what the python block before it printed."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "tutorial.md"

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def tutorial_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of the page as ``(info string, body)``, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in _FENCE.finditer(text)]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_tutorial_blocks_are_found():
    blocks = tutorial_blocks(TUTORIAL.read_text(encoding="utf-8"))
    kinds = [info for info, _ in blocks]
    assert kinds.count("python") >= 5
    assert kinds.count("text exact") >= 4
    # every checked output follows a python block
    for i, info in enumerate(kinds):
        if info == "text exact":
            assert i > 0 and kinds[i - 1] == "python", f"block {i} checks no python block"


def test_tutorial_runs_and_prints_what_it_shows(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    pytest.importorskip("cvxpy")
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    namespace: dict = {"__name__": "__tutorial__"}
    printed = ""
    ran = 0
    for i, (info, body) in enumerate(tutorial_blocks(TUTORIAL.read_text(encoding="utf-8"))):
        if info == "python":
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(body, f"{TUTORIAL.name}[block {i}]", "exec"), namespace)
            printed = buf.getvalue()
            ran += 1
        elif info == "text exact":
            assert _lines(printed) == _lines(body), (
                f"docs/tutorial.md block {i}: the code printed\n{printed}\nbut the page shows\n{body}")
    assert ran >= 5
    assert (tmp_path / "convergence.png").exists() is False  # figures go to the temp dir
    pngs = sorted(p.name for p in tmp_path.rglob("*.png"))
    assert pngs == ["convergence.png", "embedding.png"]
