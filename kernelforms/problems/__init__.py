"""The seven problems of docs/problems.md, stated once as immutable, validated data."""

from .base import Evaluation, Problem, rank_rule
from .declared import DeclaredProblem
from .bregman import DIVERGENCES, BregmanLowRank, LinearConstraints
from .mvu import MVU, RegMVU
from .npkl import LOSSES, NPKL
from .pcp import PCP, RegPCP

__all__ = [
    "Problem", "Evaluation", "rank_rule", "DeclaredProblem",
    "PCP", "RegPCP", "MVU", "RegMVU", "NPKL", "LOSSES",
    "BregmanLowRank", "LinearConstraints", "DIVERGENCES",
]
