"""The :class:`Report` of :func:`~kernelforms.compare`: rows, reference, verdicts, exports.

Three modules: :mod:`.verdict` (the verdict rule, each row's outcome and evidence),
:mod:`.rendering` (table, Markdown, legend) and :mod:`.files` (JSON, and every file written
through a temporary name and a rename).  Every name is importable from here.
"""

from __future__ import annotations

import math
import os  # noqa: F401 - tests patch kernelforms.report.os.replace
from dataclasses import dataclass, field
from typing import Any

from ..result import Result
from .files import (  # noqa: F401 - re-exported
    JSON_FORMAT,
    ReportJSON,
    ReportWriteError,
    ReportWriteWarning,
    _field_float,
    _json_float,
    _jsonable,
    _short,
    _umask,
    atomic_file,
    atomic_write,
    check_writable,
    decode_utf8,
    loads_json,
    seed_to_json,
    warn_write,
)
from .rendering import LEGEND, PLAIN_FORMULATIONS, Rendering, _num, plain_formulation  # noqa: F401
from .verdict import (  # noqa: F401 - re-exported
    DEFAULT_VTOL,
    EXIT_CODES,
    FINISHED,
    NEAR_ZERO,
    _STOPPED_SHORT,
    RowVerdict,
    Verdicts,
    _cert_gap,
    _finished,
    _is_certifying,
    _kind,
    _other_problem,
    _seconds,
    check_tolerance,
    constraint_scale,
    default_vtol,
    objective_scale,
    relative_gap,
)


@dataclass
class Report(Verdicts, Rendering, ReportJSON):
    """The outcome of :func:`compare`: one :class:`~kernelforms.result.Result` per method.

    Attributes
    ----------
    rows : list of Result
        In the order the methods were given; skipped methods have status ``skipped``
        and the reason in ``message``; failures are ``error`` / ``timeout`` rows.
    reference : str or None
        The method whose objective is the reference; ``reference_kind`` says how it was
        chosen: ``"certified"`` (a conic solver's optimality certificate), ``"certified
        bound"`` (a factorised row whose :mod:`~kernelforms.certificate` gap is within
        ``rtol``) or ``"best feasible"`` (no certificate: the best feasible objective).
    verdict : str
        ``"agree"``, ``"agree_partial"``, ``"unverified"`` or ``"disagree"`` (see
        :mod:`kernelforms.report.verdict`); ``exit_code`` is 0, 3, 3 or 1.
    objective_scale : float
        The data's scale of the objective (:func:`objective_scale`; 0: none); relative gaps
        divide by at least ``NEAR_ZERO`` times it.
    seed : int, dict or None
        The seed the methods got; a ``numpy.random.Generator`` is recorded as
        ``{"generator": "PCG64", "state": {...}}`` (its state before the first method).
    complete : bool
        False when the comparison was interrupted (the rows are the finished ones).
    recipe : dict or None
        How to rebuild the instance (set by the CLI; see :mod:`kernelforms.testing`).
    write_error : str or None
        Set by :func:`compare` when ``json_path`` could not be written.
    """

    problem_label: str
    problem_params: dict[str, Any]
    fingerprint: str
    sense: str
    rows: list[Result]
    rtol: float = 1e-4
    vtol: float = DEFAULT_VTOL
    seed: Any = 0
    reference: str | None = None
    reference_kind: str = "none"
    reference_objective: float = math.nan
    version: str = ""
    gaps: dict[str, float] = field(default_factory=dict)
    complete: bool = True
    recipe: dict[str, Any] | None = None
    time_limit: float | None = None
    objective_scale: float = 0.0
    write_error: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self.rtol = check_tolerance("rtol", self.rtol, "Report")
        self.vtol = check_tolerance("vtol", self.vtol, "Report")
        self.objective_scale = check_tolerance("objective_scale", self.objective_scale, "Report")
        if not self.version:
            from .._version import __version__

            self.version = __version__
        self._choose_reference()
