"""Public alias of :mod:`kernelforms.data.pairs` (``import kernelforms.pairs``)."""

from kernelforms.data.pairs import *  # noqa: F401,F403
from kernelforms.data.pairs import __all__  # noqa: F401
