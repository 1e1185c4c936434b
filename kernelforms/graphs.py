"""Public alias of :mod:`kernelforms.data.graphs` (``import kernelforms.graphs``)."""

from kernelforms.data.graphs import *  # noqa: F401,F403
from kernelforms.data.graphs import __all__  # noqa: F401
