"""Each `kernelforms reproduce` experiment runs end to end on a tiny setting."""

from __future__ import annotations

import json

import pytest

from kernelforms import reproduce
from kernelforms.reproduce import published as pub


def test_published_figures_are_stored_with_sources():
    assert pub.HUKWOK2013_TABLE2["iris"][0] == pytest.approx(98.69)
    assert pub.WU2009_TABLE2[100][2] == pytest.approx(2900.44)
    assert "Table 2" in pub.HUKWOK2013_SOURCE and "Table 1" in pub.WU2009_SOURCE
    assert reproduce.fit_exponent([1, 10, 100], [2, 20, 200]) == pytest.approx(1.0)


FIGURES = {"wu2009-tables": ["wu2009_table1.png", "wu2009_table2.png"],
           "hukwok2013-table2": ["hukwok2013_fig3.png"],
           "hukwok2015-tables": ["hukwok2015_table7.png"],
           "kulis2006-fig1": ["kulis2006_fig1.png"]}


#: the tiny runs of Hu & Kwok 2015's tables (5-8 s, a grid of solves) and of Hu & Kwok 2013's
#: table 2 (3 s): in the slow run only; the default run keeps the other two experiments
_SLOW_TINY = {"hukwok2015-tables", "hukwok2013-table2"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_TINY else n
                                  for n in reproduce.EXPERIMENTS])
def test_experiment_tiny_run(name, tmp_path):
    tables = reproduce.run(name, quick="tiny", out=str(tmp_path))
    assert tables
    for t in tables:
        assert t.columns != ["status"], t.text()  # the methods it needs are installed
        assert t.rows and all(len(r) == len(t.columns) for r in t.rows)
    data = json.loads((tmp_path / f"{name}.json").read_text())
    assert data["experiment"] == name and "command: kernelforms reproduce" in data["stamp"]
    assert (tmp_path / f"{name}.md").read_text().startswith(f"## {name}")
    for fig in FIGURES[name]:  # matplotlib is in the test extra
        assert (tmp_path / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", fig


def test_cli_reproduce_dispatch(capsys):
    from kernelforms.cli import main as cli

    with pytest.raises(SystemExit) as exc:
        cli(["reproduce", "--help"])
    assert exc.value.code == 0
    assert "hukwok2013-table2" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        cli(["reproduce", "no-such-experiment"])
    assert exc.value.code == 2


def test_reproduce_shows_progress_of_every_solve_in_a_log(tmp_path, capsys):
    """`kernelforms reproduce` printed nothing until an experiment ended."""
    reproduce.run("kulis2006-fig1", quick="tiny", out=str(tmp_path), progress=True)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("[kulis2006-fig1")]
    assert lines and all(" solve " in ln and " in " in ln for ln in lines), err
    assert lines[-1].split("solve ")[1].startswith(str(len(lines)))
