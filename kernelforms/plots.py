"""Figures of comparisons (matplotlib, the optional extra ``kernelforms[plot]``).

- :func:`convergence`: relative objective gap against time and against iteration for every
  row with a history (as seed 000 Fig. 1-2 and seed 004 Fig. 2-3), plus the primal / dual
  residuals of ADMM-type histories; rows without a history appear as one point (final
  gap, total time).
- :func:`scaling`: time against problem size on log-log axes with the fitted exponent per
  method (as seed 001 Fig. 2 and seed 000 Fig. 3).

Both build a :class:`matplotlib.figure.Figure` without pyplot (no display needed) and save
it when ``path`` is given.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

#: gaps below this are drawn at this value on log axes
GAP_FLOOR = 1e-16


def _figure(ncols: int, width: float = 4.6, height: float = 3.6):
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'kernelforms[plot]'") from exc
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = [fig.add_subplot(1, ncols, k + 1) for k in range(ncols)]
    return fig, axes


def _gap(values: np.ndarray, ref: float, sense: str) -> np.ndarray:
    d = values - ref if sense == "min" else ref - values
    return np.maximum(np.abs(d) / max(abs(ref), 1e-12), GAP_FLOOR)


def _reference(report: Any) -> float:
    """The best objective seen: the report's reference, or any row (final or in its history)
    that did better (so that every gap is measured from the best known value)."""
    vals = [report.reference_objective] if math.isfinite(report.reference_objective) else []
    for r in report.rows:
        if not r.ok or (math.isfinite(r.violation) and r.violation > report.vtol):
            continue
        vals.append(r.objective)
    vals = [v for v in vals if math.isfinite(v)]
    if not vals:
        return math.nan
    return float(min(vals) if report.sense == "min" else max(vals))


def convergence(report: Any, path: str | None = None, *, title: str | None = None):
    """Objective gap versus time and versus iteration (and residuals when recorded).

    Parameters
    ----------
    report : Report
        From :func:`~kernelforms.compare` or :meth:`Report.from_json` (histories are kept
        in the JSON).
    path : str, optional
        Save the figure here (format from the extension).

    Returns
    -------
    matplotlib.figure.Figure
    """
    ref = _reference(report)
    with_hist = [r for r in report.rows if r.history and len(r.history.get("objective") or []) > 1]
    residual_rows = [r for r in with_hist if "primal" in r.history or "dual" in r.history]
    fig, axes = _figure(3 if residual_rows else 2)
    ax_t, ax_i = axes[0], axes[1]
    for r in report.rows:
        if not r.ok or not math.isfinite(ref):
            continue
        obj = r.history.get("objective") if r.history else None
        if obj and len(obj) > 1:
            y = _gap(np.asarray(obj, dtype=float), ref, report.sense)
            it = np.arange(1, len(y) + 1)
            t = r.history.get("time")
            t = np.asarray(t, dtype=float) if t and len(t) == len(y) else it * (r.time / len(y))
            (line,) = ax_t.semilogy(t, y, label=r.method)
            ax_i.semilogy(it, y, label=r.method, color=line.get_color())
        else:
            y = _gap(np.array([r.objective]), ref, report.sense)
            (pt,) = ax_t.semilogy([max(r.time, 1e-6)], y, "o", label=f"{r.method} (final)")
            if r.iterations:
                ax_i.semilogy([r.iterations], y, "o", color=pt.get_color(), label=f"{r.method} (final)")
    for r in residual_rows:
        for key, style in (("primal", "-"), ("dual", "--")):
            v = r.history.get(key)
            if v:
                axes[2].semilogy(np.arange(1, len(v) + 1), np.maximum(np.asarray(v, float), GAP_FLOOR),
                                 style, label=f"{r.method} {key}")
    ylabel = "relative gap to the best objective"
    ax_t.set(xlabel="time (s)", ylabel=ylabel)
    ax_i.set(xlabel="iteration", ylabel=ylabel)
    if residual_rows:
        axes[2].set(xlabel="iteration", ylabel="residual", title="ADMM residuals")
        axes[2].legend(fontsize="small")
    for ax in (ax_t, ax_i):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.suptitle(title or report.problem_label, fontsize="medium")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def fit_exponent(n: Sequence[float], t: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of ``log t = a log n + b``; returns ``(a, b)`` (NaN with < 2 sizes)."""
    n, t = np.asarray(n, float), np.asarray(t, float)
    keep = (n > 0) & (t > 0) & np.isfinite(t)
    if len(np.unique(n[keep])) < 2:
        return math.nan, math.nan
    a, b = np.polyfit(np.log(n[keep]), np.log(t[keep]), 1)
    return float(a), float(b)


def scaling_data(reports: Sequence[Any], time: str = "time") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{method: (n, seconds)}`` over the rows with a solution."""
    pts: dict[str, list[tuple[float, float]]] = {}
    for rep in reports:
        n = rep.problem_params.get("n")
        for r in rep.rows:
            if n is None or not r.ok:
                continue
            sec = {"time": r.time, "solve": r.solve_time, "compile": r.compile_time}[time]
            pts.setdefault(r.method, []).append((float(n), float(sec)))
    return {m: (np.array([p[0] for p in v]), np.array([p[1] for p in v])) for m, v in pts.items()}


def scaling(reports: Sequence[Any], path: str | None = None, *, time: str = "time",
            title: str | None = None):
    """Time versus number of points on log-log axes, one line per method with its fitted
    exponent in the legend (``time`` is ``"time"``, ``"solve"`` or ``"compile"``)."""
    fig, (ax,) = _figure(1, width=5.5, height=4.0)
    for method, (n, t) in sorted(scaling_data(reports, time).items()):
        order = np.argsort(n)
        a, b = fit_exponent(n, t)
        label = method + (f"  (slope {a:.2f})" if math.isfinite(a) else "")
        (line,) = ax.loglog(n[order], t[order], "o", label=label)
        if math.isfinite(a):
            nn = np.geomspace(n.min(), n.max(), 50)
            ax.loglog(nn, np.exp(b) * nn**a, "-", color=line.get_color(), alpha=0.6)
    ax.set(xlabel="n (points)", ylabel=f"{time} (s)", title=title or "time versus size")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
