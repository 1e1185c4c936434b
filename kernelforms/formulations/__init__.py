"""Formulations: one module per target form (full SDP, Schur-complement SDP, SQLP, dual)."""

from .base import Compiled, Formulation, FormulationInverse, ProgramSize, program_size

__all__ = ["Compiled", "Formulation", "FormulationInverse", "ProgramSize", "program_size"]
