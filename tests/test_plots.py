"""Figures: kernel embeddings, convergence of the iterative solvers, time versus size, and
the figures behind `kernelforms compare --plot` / `kernelforms grid --plot`."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kernelforms as kf
from kernelforms import plots
from kernelforms.cli import main as cli
from kernelforms.result import Result, Status

pytest.importorskip("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")


def _report(rows, sense="min"):
    return kf.Report("toy", {"n": 20}, "f", sense, rows)


def _row(method, objective=1.0, history=None, factor=None, **kw):
    return Result(method=method, status=Status.CONVERGED, objective=objective, violation=0.0,
                  history=history or {}, factor=factor, iterations=len((history or {}).get("objective", [])) or 5,
                  time=0.1, **kw)


# ---------------------------------------------------------------------- embeddings
def test_embedding_coordinates_keep_the_kernel_distances():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((20, 2)) @ np.diag([3.0, 1.0])
    C, share = plots.embedding_coordinates(G, dims=2)
    np.testing.assert_allclose(C @ C.T, G @ G.T, atol=1e-10)  # rank 2: nothing dropped
    assert share.sum() == pytest.approx(1.0) and share[0] > share[1]
    # a dense kernel gives the same embedding up to the signs of the axes
    D, share_d = plots.embedding_coordinates(G @ G.T, dims=2)
    np.testing.assert_allclose(np.abs(D), np.abs(C), atol=1e-8)
    np.testing.assert_allclose(share_d, share, atol=1e-12)
    # rank 1 in 3 dimensions: the missing axes are zero
    E, share_e = plots.embedding_coordinates(G[:, :1], dims=3)
    assert np.all(E[:, 1:] == 0) and share_e[1:].sum() == 0
    # a Result is read through its factor
    F, _ = plots.embedding_coordinates(_row("x", factor=G), dims=2)
    np.testing.assert_allclose(F, C)


def test_embedding_of_a_row_without_kernel_is_a_clear_error():
    with pytest.raises(kf.KernelformsError, match="returned no kernel"):
        plots.embedding_coordinates(Result(method="m", status=Status.ERROR), dims=2)
    with pytest.raises(kf.KernelformsError, match="2 or 3"):
        plots.embedding_coordinates(np.eye(3), dims=4)


@pytest.mark.parametrize("dims", [2, 3])
def test_embedding_png_by_label_and_by_coordinate(dims, tmp_path):
    rng = np.random.default_rng(1)
    G = rng.standard_normal((30, 4))
    y = np.repeat([0, 1, 2], 10)
    path = tmp_path / f"emb{dims}.png"
    fig = plots.embedding(G, str(path), color=y, dims=dims)
    assert path.stat().st_size > 1000
    assert len(fig.axes[0].get_legend().get_texts()) == 3  # one entry per class
    t = np.linspace(0, 1, 30)  # a continuous coordinate: a colour bar
    path2 = tmp_path / f"emb{dims}c.png"
    fig2 = plots.embedding(G, str(path2), color=t, dims=dims, color_label="position")
    assert path2.stat().st_size > 1000 and len(fig2.axes) == 2
    with pytest.raises(kf.KernelformsError, match="color has 5 values for 30 points"):
        plots.embedding(G, color=t[:5])


# ---------------------------------------------------------------------- convergence
def test_convergence_draws_the_residuals_every_iterative_solver_records(tmp_path):
    k = np.arange(1, 11, dtype=float)
    rows = [
        _row("admm", 1.0, {"objective": list(1 + 2.0 ** -k), "primal": list(10 ** -k), "dual": list(10 ** -k)}),
        _row("lowrank", 1.0, {"objective": list(1 + 3.0 ** -k), "violation": list(10 ** -k)}),
        _row("bcd", 1.0, {"objective": list(1 + 4.0 ** -k), "change": list(10 ** -k)}),
        _row("smo", 1.0, {"dual_objective": list(1 - 2.0 ** -k), "gap": list(10 ** -k),
                          "max_change": list(10 ** -k)}),
        _row("simplenpkl", 1.0, {"dual": list(1 - 2.0 ** -k), "gap": list(10 ** -k)}),
        _row("burg", 1.0, {"divergence": list(k), "violation": list(10 ** -k)}),
        _row("sdp:clarabel", 1.0),
    ]
    path = tmp_path / "conv.png"
    fig = plots.convergence(_report(rows), str(path), title="all solvers")
    assert path.stat().st_size > 1000
    ax_t, ax_i, ax_r = fig.axes
    labels = {line.get_label() for line in ax_r.get_lines()}
    assert {"admm primal", "admm dual", "lowrank violation", "bcd change", "smo gap", "smo max_change",
            "simplenpkl gap", "burg violation"} <= labels
    assert "simplenpkl dual" not in labels  # SimpleNPKL's "dual" is an objective value
    assert ax_r.get_yscale() == "log" and ax_i.get_yscale() == "log"
    assert {"admm (10 it.)", "lowrank (10 it.)", "bcd (10 it.)"} <= {line.get_label() for line in ax_i.get_lines()}


def _visible(line) -> bool:
    """A legend entry points at something drawn: a marker, or a line through two points."""
    x = np.asarray(line.get_xdata(), dtype=float)
    has_marker = line.get_marker() not in (None, "None", "", " ")
    return len(x) > 0 and (has_marker or len(x) >= 2)


def test_no_invented_floor_the_best_row_is_marked_with_its_status():
    """The row at the best objective has gap 0: it is a vertical line naming its role and
    status, not a point at 1e-16 (a max_iter row that looked the most accurate); a max_iter row
    is never the reference, so it is named "best objective"."""
    k = np.arange(1, 11, dtype=float)
    best = Result(method="lowrank", status=Status.MAX_ITER, objective=1.0, violation=0.0, time=0.5,
                  iterations=300, certified_gap=1.8)
    rows = [best, _row("admm", 1.0 + 1e-3, {"objective": list(1 + 1e-3 + 2.0 ** -k)})]
    fig = plots.convergence(_report(rows))
    ax_t, ax_i = fig.axes[:2]
    for ax in (ax_t, ax_i):
        for line in ax.get_lines():
            y = np.asarray(line.get_ydata(), dtype=float)
            if line.get_linestyle() != ":":
                assert np.all(y[np.isfinite(y)] >= 1e-6), (line.get_label(), y)  # nothing at a floor
    marks = [line for line in ax_t.get_lines() if line.get_linestyle() == ":"]
    assert len(marks) == 1 and "lowrank: best objective, gap 0 [max_iter, cert. gap 1.8]" == marks[0].get_label()


def test_iteration_axis_is_each_run_s_fraction_so_a_long_run_does_not_flatten_the_others():
    short = _row("admm", 1.0, {"objective": list(1 + 2.0 ** -np.arange(1, 41.0))})
    long_ = _row("mvu", 1.0, {"objective": list(1 + 1e-3 * np.exp(-np.arange(1, 87001.0) / 8000))})
    fig = plots.convergence(_report([short, long_]))
    ax_i = fig.axes[1]
    spans = {line.get_label(): (np.min(line.get_xdata()), np.max(line.get_xdata())) for line in ax_i.get_lines()}
    assert spans["admm (40 it.)"][1] == 1.0 and spans["mvu (87,000 it.)"][1] == 1.0
    assert spans["admm (40 it.)"][0] == pytest.approx(1 / 40)


def test_every_legend_entry_of_the_residual_panel_is_visible():
    """bcd records its certified gap on a few sweeps only (NaN elsewhere): markers, not an
    invisible line; a series with nothing drawable gets no entry."""
    gap = np.full(200, np.nan)
    gap[[49, 99, 199]] = [1e-2, 1e-3, 5e-4]
    row = _row("bcd", 1.0, {"objective": list(1 + 2.0 ** -np.arange(1, 201.0)), "gap": list(gap),
                            "change": list(10 ** -np.linspace(1, 8, 200))})
    empty = _row("lowrank", 1.0, {"objective": list(1 + 3.0 ** -np.arange(1, 11.0)), "violation": [0.0] * 10})
    fig = plots.convergence(_report([row, empty]))
    ax_r = fig.axes[2]
    handles, labels = ax_r.get_legend_handles_labels()
    assert "bcd gap" in labels and "lowrank violation" not in labels
    assert all(_visible(h) for h in handles)


def test_scaling_slope_is_not_set_by_one_outlier(tmp_path):
    n = np.array([100, 200, 400, 1000, 2000, 4000.0])
    t = 1e-3 * n**2
    t_out = t.copy()
    t_out[-1] *= 30  # one slow run on a busy machine
    a, _ = plots.robust_loglog_fit(n, t_out)
    assert a == pytest.approx(2.0, abs=1e-9)
    from kernelforms.util import loglog_fit

    assert loglog_fit(n, t_out)[0] > 2.3  # least squares follows the outlier
    reps = [kf.Report("toy", {"n": float(k)}, "f", "min", [Result(method="scs", status=Status.OPTIMAL,
            objective=1.0, violation=0.0, time=float(v))]) for k, v in zip(n, t_out)]
    fig = plots.scaling(reps, str(tmp_path / "s.png"))
    (label,) = fig.axes[0].get_legend_handles_labels()[1]
    assert label == "scs  (slope 2.00, Theil-Sen, 6 points)"
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == 6  # every point is shown
    # a run stopped by its time limit is shown apart (an open triangle) and left out of the fit
    reps.append(kf.Report("toy", {"n": 8000.0}, "f", "min", [Result(
        method="scs", status=Status.TIMEOUT, objective=float("nan"), violation=float("nan"), time=120.0)]))
    fig = plots.scaling(reps)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["scs  (slope 2.00, Theil-Sen, 6 points)",
                      "scs: stopped by the time limit (at least this long)"]


def test_history_in_solver_units_is_not_drawn_as_a_gap():
    # lowrank on MVU recorded a scaled, negated model objective: a flat gap of 1 was drawn
    k = np.arange(1, 11, dtype=float)
    rows = [_row("sdp", 8363.3),
            _row("lowrank", 8363.29, {"objective": list(-0.5 - 2.0 ** -k), "violation": list(10 ** -k)})]
    fig = plots.convergence(_report(rows, sense="max"))
    labels = [line.get_label() for line in fig.axes[1].get_lines()]
    assert "lowrank" not in labels and "lowrank (final; history not in problem units) (10 it.)" in labels
    assert plots.objective_history(rows[1]) is None


def test_convergence_from_real_solver_histories(tmp_path):
    """Each hand-written solver of a small instance leaves a history the figure draws."""
    X, y = kf.datasets.load("iris", n_points=24)
    from kernelforms.problems.factory import build_problem

    pcp = build_problem("pcp", X, y)
    npkl = build_problem("npkl", X, y)
    rows = [kf.solve(pcp, m) for m in ("admm", "bcd")]
    fig = plots.convergence(_report(rows), str(tmp_path / "pcp.png"))
    labels = {line.get_label() for line in fig.axes[2].get_lines()}
    assert {"admm primal", "bcd change"} <= labels
    assert {"admm", "bcd"} <= {line.get_label().split(" (")[0] for line in fig.axes[1].get_lines()}
    fig = plots.convergence(_report([kf.solve(npkl, "simplenpkl")]))
    assert any(line.get_label() == "simplenpkl gap" for line in fig.axes[2].get_lines())


def test_overview_shows_convergence_and_the_best_kernel(tmp_path):
    rng = np.random.default_rng(2)
    G = rng.standard_normal((20, 3))
    k = np.arange(1, 8, dtype=float)
    rows = [_row("worse", 2.0, factor=2 * G),
            _row("admm", 1.0, {"objective": list(1 + 2.0 ** -k), "primal": list(10 ** -k)}, factor=G)]
    fig = plots.overview(_report(rows), str(tmp_path / "o.png"), color=np.arange(20) % 2)
    assert (tmp_path / "o.png").stat().st_size > 1000
    assert len(fig.axes) == 4 and "admm" in fig.axes[-1].get_title()
    # conic rows only (no history): the time panel and the embedding
    fig = plots.overview(_report([_row("sdp", 1.0, factor=G)]))
    assert len(fig.axes) == 2
    # no kernel (a report read back from JSON): convergence only
    rep = kf.Report.from_json(_report(rows).to_json())
    assert len(plots.overview(rep).axes) == 3


# ---------------------------------------------------------------------- the CLI
def test_compare_plot_of_mvu_writes_convergence_and_embedding(tmp_path, capsys):
    png = tmp_path / "mvu.png"
    code = cli(["compare", "mvu", "--dataset", "swiss_roll", "--n-points", "25", "--k", "6",
                "--methods", "sdp:clarabel", "--plot", str(png), "--quiet"])
    out = capsys.readouterr().out
    # 3: Clarabel may stop at optimal_inaccurate here, and that row alone verifies nothing
    assert code in (0, 3), out
    assert "(25 points)" in out and png.stat().st_size > 1000


def test_missing_matplotlib_names_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(plots.PlotDependencyError, match=r'pip install "kernelforms\[plot\]"'):
        plots.require_matplotlib()
    with pytest.raises(ImportError):  # still an ImportError for callers that catch that
        plots.scaling([], None)
    # the CLI refuses before running anything
    monkeypatch.setattr(sys.modules["kernelforms.compare"], "compare",
                        lambda *a, **k: pytest.fail("compare ran"))
    assert cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", "sdp",
                "--plot", str(tmp_path / "x.png")]) == 2
    assert 'pip install "kernelforms[plot]"' in capsys.readouterr().err


def test_figure_path_with_an_unknown_extension_is_refused_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.modules["kernelforms.compare"], "compare",
                        lambda *a, **k: pytest.fail("compare ran"))
    assert cli(["compare", "pcp", "--dataset", "iris", "--n-points", "30", "--methods", "sdp",
                "--plot", str(tmp_path / "x.pgn")]) == 2
    err = capsys.readouterr().err
    assert "'.pgn'" in err and ".png" in err
    plots.check_figure_path(tmp_path / "x.svg")  # fine
