"""kernelforms: state kernel-learning problems once, compile them into every conic
formulation that applies, solve them with conic or hand-written solvers, and check
that the objectives agree.

>>> import kernelforms as kf
>>> X, y = kf.datasets.load("soybean")
>>> problem = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, seed=0))
>>> report = kf.compare(problem, ["sdp:scs", "sdp:clarabel"])   # doctest: +SKIP

Nothing heavy (CVXPY) is imported until a method runs.
"""

from ._version import __version__
from .errors import (
    ConvergenceWarning,
    DataError,
    KernelformsError,
    NotApplicable,
    NumericalTrouble,
    OptionError,
    ProblemError,
    ProblemWarning,
    SolverError,
    SolverNotFound,
)
from .methods import applicable_methods, get_method, method_names, solve
from .problems import (MVU, NPKL, PCP, BregmanLowRank, DeclaredProblem, LinearConstraints, RegMVU,
                       RegPCP)
from . import model  # noqa: E402  (the vocabulary problems are declared in)
from .result import LowRank, Result, Status
from . import datasets, graphs, pairs  # noqa: E402  (thin public aliases of kernelforms.data)
from .compare import Report, compare  # noqa: E402
from .grid import compare_grid  # noqa: E402
from . import testing  # noqa: E402
from .explain import explain  # noqa: E402
from .verify import VerifyResult, verify  # noqa: E402

__all__ = [
    "__version__",
    "solve", "compare", "compare_grid", "Report", "testing", "explain", "verify", "VerifyResult", "get_method", "method_names", "applicable_methods",
    "PCP", "RegPCP", "MVU", "RegMVU", "NPKL", "BregmanLowRank", "LinearConstraints",
    "DeclaredProblem", "model",
    "LowRank", "Result", "Status",
    "datasets", "graphs", "pairs",
    "KernelformsError", "ProblemError", "DataError", "NotApplicable", "SolverNotFound",
    "SolverError", "OptionError", "NumericalTrouble", "ConvergenceWarning", "ProblemWarning",
    "KernelLearner", "ConstrainedKernelClustering",
    "export", "ExternalSolution", "exchange",
]

#: scikit-learn estimators (kernelforms.estimator), imported on first use: importing
#: scikit-learn costs about a second
_LAZY = {"KernelLearner": "estimator", "ConstrainedKernelClustering": "estimator",
         # export to SDPA / CBF and external solutions (kernelforms.exchange)
         "export": "exchange", "ExternalSolution": "exchange"}


def __getattr__(name: str):
    import importlib

    if name == "exchange":
        return importlib.import_module(".exchange", __name__)
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'kernelforms' has no attribute {name!r}")
