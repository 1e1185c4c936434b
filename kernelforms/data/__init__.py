"""Data sets, kNN graphs / Laplacians and must-link / cannot-link pairs.

Re-exports the public names of :mod:`kernelforms.data.datasets`,
:mod:`kernelforms.data.graphs` and :mod:`kernelforms.data.pairs`.
"""

from kernelforms.data.datasets import *  # noqa: F401,F403
from kernelforms.data.datasets import __all__ as _datasets_all
from kernelforms.data.graphs import *  # noqa: F401,F403
from kernelforms.data.graphs import __all__ as _graphs_all
from kernelforms.data.pairs import *  # noqa: F401,F403
from kernelforms.data.pairs import __all__ as _pairs_all

__all__ = [*_datasets_all, *_graphs_all, *_pairs_all]
