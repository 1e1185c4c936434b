"""docs/tutorial.md has the shape its lecture depends on. That it runs as written, and prints
what its ```text exact blocks show, is checked with every other page by tests/test_docs_examples.py."""

from __future__ import annotations

import re
from pathlib import Path


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
