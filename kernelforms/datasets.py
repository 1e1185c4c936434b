"""Public alias of :mod:`kernelforms.data.datasets` (``import kernelforms.datasets``)."""

from kernelforms.data.datasets import *  # noqa: F401,F403
from kernelforms.data.datasets import __all__  # noqa: F401
