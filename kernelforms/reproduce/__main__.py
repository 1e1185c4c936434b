"""python -m kernelforms.reproduce EXPERIMENT"""
from . import main

raise SystemExit(main())
