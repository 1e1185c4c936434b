"""The registry of method names: conic formulations and hand-written solvers.

Each entry is ``"module:Class"`` so that nothing heavy is imported until a method is used.
Adding a method means writing its module and adding one line here.  This module imports
no method: :mod:`kernelforms.methods` (``get_method``, ``solve``) and the conic dispatch
(:mod:`kernelforms.solvers.conic`, which suggests the formulations that fit) both read it.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import SolverNotFound

#: conic formulations: method name -> "module:Class" (a Formulation)
FORMULATIONS: dict[str, str] = {
    "sdp": "kernelforms.formulations.full_sdp:FullSDP",
    "scsdp": "kernelforms.formulations.schur_sdp:SchurComplementSDP",
    "scsdp_factor": "kernelforms.formulations.schur_sdp:FactoredSchurComplementSDP",
    "sqlp": "kernelforms.formulations.sqlp:SQLP",
    "dual": "kernelforms.formulations.dual_sdp:DualSDP",
}

#: hand-written solvers: method name -> "module:Class" (an IterativeSolver)
SOLVERS: dict[str, str] = {
    "lowrank": "kernelforms.solvers.lowrank:LowRankBM",
    "mvu": "kernelforms.solvers.mvu_alm:MVUAugmentedLagrangian",
    "smo": "kernelforms.solvers.smo:HoiSMO",
    "simplenpkl": "kernelforms.solvers.simplenpkl:SimpleNPKL",
    "burg": "kernelforms.solvers.burg:BurgProjection",
    "vonneumann": "kernelforms.solvers.von_neumann:VonNeumannProjection",
    "admm": "kernelforms.solvers.admm:KLADMM",
    "bcd": "kernelforms.solvers.bcd:BCDKL",
}


def method_names() -> list[str]:
    """Every method name this installation knows (without solver suffixes)."""
    return list(FORMULATIONS) + list(SOLVERS)


def load(path: str, name: str = "") -> Any:
    """The class registered as ``path`` (``"module:Class"``) for method ``name``."""
    mod, _, cls = path.partition(":")
    try:
        return getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as exc:
        # a registered method whose module is missing, broken or lacks the class
        raise SolverNotFound(
            f"method {name!r} is registered as {path!r} but cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
