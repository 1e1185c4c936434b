"""Figures of comparisons and learned kernels (matplotlib, the optional extra ``kernelforms[plot]``).

- :func:`convergence`: relative objective gap against time and against the fraction of each
  row's iterations (as in Hu & Kwok 2013 and Hu & Kwok 2015; iterations of different solvers
  are different units, so each run spans the same width and its count is in the legend),
  plus every residual the iterative solvers record (ADMM's primal / dual residuals, the
  constraint violation of the low-rank and Bregman solvers, the duality gap of SMO and
  SimpleNPKL, BCD's change per sweep), log scale; rows without a history appear as one
  point (final gap, total time). A gap of exactly zero has no place on a log axis: the row
  that holds the best objective is marked by a vertical line and named in the legend with
  its status, rather than drawn at an invented floor.
- :func:`embedding`: the learned kernel's embedding, a 2-D or 3-D scatter of the top
  eigenvectors of ``K = F F^T`` scaled by the square roots of their eigenvalues, coloured
  by class label or by a continuous coordinate (the position along a Swiss roll).
- :func:`overview`: both of the above in one figure (``kernelforms compare --plot``).
- :func:`scaling`: time against problem size on log-log axes, every measured point shown,
  with a fitted exponent per method that one outlier cannot move (Theil-Sen: the median of
  the pairwise slopes; as in Wu et al. 2009 and Hu & Kwok 2013; ``kernelforms grid --plot``).

All build a :class:`matplotlib.figure.Figure` without pyplot (no display needed) and save
it when ``path`` is given.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .errors import KernelformsError

#: relative gaps below this are round-off: not drawn on the log axes (a zero gap has no place
#: there; the row holding the best objective is marked instead)
GAP_FLOOR = 1e-16

#: statuses that claim what they were asked to reach; other rows say their status in the legend
_DONE = ("converged", "optimal")

#: history keys drawn on the residual panel (ADMM's "dual" only next to its "primal": the
#: "dual" of other solvers is a dual objective value)
RESIDUAL_KEYS = ("residual", "primal", "dual", "violation", "gap", "change", "max_change")

INSTALL_HINT = 'pip install "kernelforms[plot]"'


class PlotDependencyError(KernelformsError, ImportError):
    """matplotlib is not installed (figures are an optional extra)."""


def require_matplotlib() -> None:
    """Raise :class:`PlotDependencyError` (with the install command) without matplotlib."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as exc:
        raise PlotDependencyError(
            f"figures need matplotlib, which is not installed: {INSTALL_HINT}") from exc


def check_figure_path(path: Any, what: str = "path") -> None:
    """Refuse a figure path whose extension matplotlib cannot write (before any work)."""
    import os

    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext and ext not in formats:
        raise KernelformsError(f"The {what!r} option cannot be written: matplotlib does not write "
                               f"'.{ext}' files; use one of {', '.join('.' + f for f in sorted(formats))} "
                               f"(got {os.fspath(path)!r}).")


def _figure(ncols: int, width: float = 4.6, height: float = 3.6, projections: Sequence[Any] = ()):
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    proj = list(projections) + [None] * (ncols - len(projections))
    axes = [fig.add_subplot(1, ncols, k + 1, projection=proj[k]) for k in range(ncols)]
    return fig, axes


def _gap(values: np.ndarray, ref: float, sense: str) -> np.ndarray:
    """Relative gap to ``ref``; NaN where it is below :data:`GAP_FLOOR` (not drawable on a log
    axis, and never replaced by an invented value)."""
    d = values - ref if sense == "min" else ref - values
    g = np.abs(d) / max(abs(ref), 1e-12)
    return np.where(g >= GAP_FLOOR, g, np.nan)


def _status_note(row: Any) -> str:
    """``""`` for a row that reached its target, else ``"max_iter, cert. gap 1.8"``."""
    status = getattr(row.status, "value", str(row.status))
    if status in _DONE:
        return ""
    cg = getattr(row, "certified_gap", None)
    return status + (f", cert. gap {cg:.2g}" if cg is not None and math.isfinite(cg) else "")


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


def residual_series(history: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """The residual-like series of a history: ``[(key, values), ...]`` (see RESIDUAL_KEYS)."""
    out = []
    for key in RESIDUAL_KEYS:
        v = history.get(key) if history else None
        if key == "dual" and "primal" not in history:
            continue
        if v is not None and len(v) > 0:
            arr = np.asarray(v, dtype=float)
            if np.any(np.isfinite(arr)):
                out.append((key, arr))
    return out


def _has_residuals(report: Any) -> bool:
    return any(residual_series(r.history) for r in report.rows if r.history)


def objective_history(row: Any) -> np.ndarray | None:
    """The row's objective history when it is in the problem's units, else None.

    A history whose last value is not within 1% of the row's final objective was recorded
    in the solver's own units (a scaled or negated model) and cannot be compared with the
    other rows; it is left out of the gap panels rather than drawn wrong."""
    obj = row.history.get("objective") if row.history else None
    if not obj or len(obj) < 2:
        return None
    y = np.asarray(obj, dtype=float)
    fin = y[np.isfinite(y)]
    if not fin.size or not math.isfinite(row.objective):
        return None
    if abs(fin[-1] - row.objective) > 1e-2 * max(abs(row.objective), abs(fin[-1]), 1e-12):
        return None
    return y


def _draw_convergence(report: Any, ax_t: Any, ax_i: Any, ax_r: Any | None) -> None:
    ref = _reference(report)
    marked = []  # rows at the best objective: a vertical line each (their gap is 0)
    for r in report.rows:
        if not r.ok or not math.isfinite(ref):
            continue
        obj = objective_history(r)
        note = _status_note(r)
        if obj is None and r.history and len(r.history.get("objective") or []) > 1:
            kind = "final; history not in problem units"
        else:
            kind = "final"
        final_gap = _gap(np.array([r.objective]), ref, report.sense)[0]
        if obj is not None:
            y = _gap(np.asarray(obj, dtype=float), ref, report.sense)
            it = np.arange(1, len(y) + 1)
            t = r.history.get("time")
            t = np.asarray(t, dtype=float) if t and len(t) == len(y) else it * (r.time / len(y))
            label = r.method + (f" [{note}]" if note else "")
            (line,) = ax_t.semilogy(t, y, label=label)
            count = int(r.iterations or len(y))  # the run's own count (a history may record fewer)
            ax_i.semilogy(it / len(y), y, label=f"{label} ({count:,} it.)", color=line.get_color())
            color = line.get_color()
            t_end, i_end = float(t[-1]), 1.0
        else:
            label = f"{r.method} ({kind}" + (f"; {note}" if note else "") + ")"
            color = None
            t_end, i_end = max(r.time, 1e-6), 1.0
            if math.isfinite(final_gap):
                (pt,) = ax_t.semilogy([t_end], [final_gap], "o", label=label)
                color = pt.get_color()
                if r.iterations:
                    ax_i.semilogy([i_end], [final_gap], "o", color=color,
                                  label=f"{label} ({r.iterations:,} it.)")
        if not math.isfinite(final_gap):
            marked.append((r, t_end, color, note))
    for r, t_end, color, note in marked:
        role = "reference" if r.method == getattr(report, "reference", None) else "best objective"
        label = f"{r.method}: {role}, gap 0" + (f" [{note}]" if note else "")
        ax_t.axvline(t_end, linestyle=":", color=color or "black", label=label)
    if ax_r is not None:
        styles = ["-", "--", ":", "-."]
        for r in report.rows:
            for k, (key, v) in enumerate(residual_series(r.history)):
                it = np.arange(1, len(v) + 1) / len(v)
                keep = np.isfinite(v) & (np.abs(v) > 0)
                if not keep.any():
                    continue
                # a series recorded on a few iterations only (bcd's gap) gets markers, so that
                # its legend entry has something visible to point at
                marker = "o" if keep.sum() < 0.5 * len(v) or keep.sum() < 3 else None
                ax_r.semilogy(it[keep], np.abs(v[keep]), styles[k % 4], marker=marker, markersize=3,
                              label=f"{r.method} {key}")
        ax_r.set(xlabel="fraction of the run's iterations", ylabel="residual / violation / gap",
                 title="residuals of the iterative solvers")
        ax_r.grid(True, which="both", alpha=0.3)
        if ax_r.get_legend_handles_labels()[0]:
            ax_r.legend(fontsize="small")
    ylabel = "relative gap to the best objective"
    ends = [t for _, t, _, _ in marked] + [r.time for r in report.rows if r.ok and r.time > 0]
    if ends and hasattr(ax_t, "set_xscale") and max(ends) > 20 * min(ends):
        ax_t.set_xscale("log")  # a slow row (a conic solve) would flatten the fast ones
    ax_t.set(xlabel="time (s)", ylabel=ylabel)
    ax_i.set(xlabel="fraction of the run's iterations (count in the legend)", ylabel=ylabel)
    for ax in (ax_t, ax_i):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")


def convergence(report: Any, path: str | None = None, *, title: str | None = None):
    """Objective gap versus time and versus iteration, and the residuals when recorded.

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
        Two panels (gap vs time, gap vs iteration), three when some row recorded
        residuals.
    """
    has_res = _has_residuals(report)
    fig, axes = _figure(3 if has_res else 2)
    _draw_convergence(report, axes[0], axes[1], axes[2] if has_res else None)
    fig.suptitle(title or report.problem_label, fontsize="medium")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


# ---------------------------------------------------------------------- embeddings
def embedding_coordinates(kernel: Any, dims: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates of the kernel embedding and the share of the spectrum they hold.

    Parameters
    ----------
    kernel : Result, LowRank, factor (n, r) or kernel matrix (n, n)
        A factor ``F`` (``K = F F^T``) is used through its thin SVD ``F = U S V^T``: the
        coordinates are ``U[:, :dims] * S[:dims]``, the top eigenvectors of K scaled by
        the square roots of their eigenvalues (so distances between points are those of
        the kernel, up to the dropped directions). A square matrix is treated as K.
    dims : {2, 3}

    Returns
    -------
    coords : ndarray of shape (n, dims)
        Columns past the kernel's rank are zero.
    share : ndarray of shape (dims,)
        Each direction's eigenvalue over the trace.
    """
    from .result import LowRank

    if dims not in (2, 3):
        raise KernelformsError(f"an embedding has 2 or 3 dimensions; got dims={dims!r}")
    if hasattr(kernel, "factor") and hasattr(kernel, "status"):  # a Result
        if kernel.factor is None:
            raise KernelformsError(f"method {kernel.method!r} returned no kernel "
                                   f"(status {kernel.status.value}): nothing to embed")
        kernel = kernel.factor
    if isinstance(kernel, LowRank):
        kernel = kernel.G
    A = np.asarray(kernel, dtype=float)
    if A.ndim != 2:
        raise KernelformsError(f"expected a factor (n, r) or a kernel (n, n); got shape {A.shape}")
    n = A.shape[0]
    if A.shape[1] == n and np.allclose(A, A.T):
        w, U = np.linalg.eigh((A + A.T) / 2)
        order = np.argsort(w)[::-1]
        w = np.maximum(w[order], 0.0)
        coords = U[:, order] * np.sqrt(w)
        ev = w
    else:
        U, sv, _ = np.linalg.svd(A, full_matrices=False)
        coords = U * sv
        ev = sv**2
    out = np.zeros((n, dims))
    k = min(dims, coords.shape[1])
    out[:, :k] = coords[:, :k]
    total = float(ev.sum())
    share = np.zeros(dims)
    share[:k] = ev[:k] / total if total > 0 else 0.0
    return out, share


def _best_row(report: Any) -> Any:
    """The row whose kernel is drawn: the reference if it has a factor, else the best
    feasible row with one, else None."""
    with_k = [r for r in report.rows if r.ok and r.factor is not None]
    if not with_k:
        return None
    for r in with_k:
        if r.method == report.reference:
            return r
    feasible = [r for r in with_k if not (math.isfinite(r.violation) and r.violation > report.vtol)]
    pool = feasible or with_k
    key = (lambda r: r.objective) if report.sense == "min" else (lambda r: -r.objective)
    return min(pool, key=key)


def _draw_embedding(ax: Any, coords: np.ndarray, share: np.ndarray, color: Any, fig: Any,
                    title: str, color_label: str | None = None) -> None:
    dims = coords.shape[1]
    pts = [coords[:, k] for k in range(dims)]
    c = None if color is None else np.asarray(color)
    if c is not None and len(c) != len(coords):
        raise KernelformsError(f"color has {len(c)} values for {len(coords)} points")
    categorical = c is not None and (c.dtype.kind in "iub" or c.dtype.kind in "OUS")
    if categorical and len(np.unique(c)) <= 20:
        for lab in np.unique(c):
            m = c == lab
            ax.scatter(*[p[m] for p in pts], s=12, label=str(lab))
        ax.legend(fontsize="small", title=color_label or "label", markerscale=1.5)
    elif c is not None:
        sc = ax.scatter(*pts, c=c.astype(float), s=12, cmap="viridis")
        fig.colorbar(sc, ax=ax, shrink=0.8, label=color_label or "coordinate")
    else:
        ax.scatter(*pts, s=12)
    labels = [f"component {k + 1} ({100 * share[k]:.0f}%)" for k in range(dims)]
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    if dims == 3:
        ax.set_zlabel(labels[2])
    ax.set_title(title, fontsize="medium")


def embedding(kernel: Any, path: str | None = None, *, color: Any = None, dims: int = 2,
              title: str | None = None, color_label: str | None = None):
    """Scatter of the learned kernel's embedding (see :func:`embedding_coordinates`).

    Parameters
    ----------
    kernel : Result, LowRank, factor (n, r) or kernel matrix (n, n)
    path : str, optional
        Save the figure here.
    color : array of shape (n,), optional
        Integer labels (one colour per class, with a legend) or floats (a colour map, e.g.
        the position along a Swiss roll).
    dims : {2, 3}
    title : str, optional
    color_label : str, optional
        Title of the legend or colour bar (default "label" / "coordinate").

    Returns
    -------
    matplotlib.figure.Figure
    """
    coords, share = embedding_coordinates(kernel, dims)
    fig, (ax,) = _figure(1, width=5.0, height=4.2, projections=["3d" if dims == 3 else None])
    name = getattr(kernel, "method", None)
    _draw_embedding(ax, coords, share, color, fig,
                    title or ("embedding of the kernel" + (f" of {name}" if name else "")), color_label)
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def overview(report: Any, path: str | None = None, *, color: Any = None, dims: int = 2,
             title: str | None = None, color_label: str | None = None):
    """Convergence panels (see :func:`convergence`) beside the embedding of the best row's
    kernel (the reference, else the best feasible row with a kernel).

    The gap-versus-iteration panel is left out when no row recorded an objective history
    (conic solvers only), the residual panel when no row recorded residuals, and the
    embedding when no row has a kernel (a report read back from JSON).
    """
    has_hist = any(objective_history(r) is not None for r in report.rows)
    has_res = _has_residuals(report)
    best = _best_row(report)
    n_conv = 1 + has_hist + has_res
    ncols = n_conv + (best is not None)
    proj = [None] * n_conv + (["3d" if dims == 3 else None] if best is not None else [])
    fig, axes = _figure(ncols, projections=proj)
    if has_hist:
        _draw_convergence(report, axes[0], axes[1], axes[2] if has_res else None)
    else:
        _draw_convergence(report, axes[0], _Sink(), axes[1] if has_res else None)
    if best is not None:
        coords, share = embedding_coordinates(best, dims)
        _draw_embedding(axes[-1], coords, share, color, fig, f"embedding of the {best.method} kernel",
                        color_label)
    fig.suptitle(title or report.problem_label, fontsize="medium")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


class _SinkLine:
    def get_color(self) -> None:
        return None


class _Sink:
    """Swallows drawing calls (the iteration panel when no row has a history)."""

    def semilogy(self, *a: Any, **k: Any) -> list:
        return [_SinkLine()]

    def __getattr__(self, name: str) -> Any:
        if name == "get_legend_handles_labels":
            return lambda: ([], [])
        return lambda *a, **k: None


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


def robust_loglog_fit(sizes: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """Theil-Sen fit of ``log value = a log size + b``: ``a`` is the median of the slopes
    between every two points of different sizes, ``b`` the median of ``log value - a log
    size``. One outlier moves neither (the least-squares slope follows it). Non-positive or
    non-finite points are left out; ``(nan, nan)`` with fewer than two distinct sizes."""
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(values, dtype=float)
    keep = np.isfinite(n) & (n > 0) & np.isfinite(t) & (t > 0)
    x, y = np.log(n[keep]), np.log(t[keep])
    i, j = np.triu_indices(len(x), k=1)
    distinct = x[i] != x[j]
    if not distinct.any():
        return math.nan, math.nan
    slopes = (y[j] - y[i])[distinct] / (x[j] - x[i])[distinct]
    a = float(np.median(slopes))
    return a, float(np.median(y - a * x))


def scaling(reports: Sequence[Any], path: str | None = None, *, time: str = "time",
            title: str | None = None):
    """Time versus number of points on log-log axes: every measured point, and one line per
    method with its exponent (``time`` is ``"time"``, ``"solve"`` or ``"compile"``).

    The exponent is the Theil-Sen slope (:func:`robust_loglog_fit`), so one slow run (a busy
    machine, a cold cache) does not set it; the legend says how many points it rests on."""
    fig, (ax,) = _figure(1, width=5.5, height=4.0)
    colors: dict[str, Any] = {}
    for method, (n, t) in sorted(scaling_data(reports, time).items()):
        order = np.argsort(n)
        a, b = robust_loglog_fit(n, t)
        label = method + (f"  (slope {a:.2f}, Theil-Sen, {len(n)} points)" if math.isfinite(a) else "")
        (line,) = ax.loglog(n[order], t[order], "o", label=label)
        colors[method] = line.get_color()
        if math.isfinite(a):
            nn = np.geomspace(n.min(), n.max(), 50)
            ax.loglog(nn, np.exp(b) * nn**a, "-", color=line.get_color(), alpha=0.6)
    # a run stopped by its time limit took at least that long: an open triangle, not in the fit
    stopped: dict[str, list[tuple[float, float]]] = {}
    for rep in reports:
        n = rep.problem_params.get("n")
        for r in rep.rows:
            if n is not None and getattr(r.status, "value", r.status) == "timeout" and r.time > 0:
                stopped.setdefault(r.method, []).append((float(n), float(r.time)))
    for method, pts in sorted(stopped.items()):
        x, y = zip(*pts)
        ax.loglog(x, y, "^", fillstyle="none", color=colors.get(method),
                  label=f"{method}: stopped by the time limit (at least this long)")
    ax.set(xlabel="n (points)", ylabel=f"{time} (s)", title=title or "time versus size")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
