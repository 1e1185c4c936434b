"""Benchmarks: one module per benchmark, each with ``main(argv)``; run as ``kernelforms bench NAME``."""
