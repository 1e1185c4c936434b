"""Benchmarks: one module per benchmark, each with ``main(argv)``; run as ``kernelforms bench NAME``."""


def cache_directory(path: str, option: str = "--cache") -> str:
    """``path`` as a benchmark's cache directory, created if missing; a ``ValueError`` naming
    ``option`` when it is a file (raised before any work, not after building what it would keep)."""
    import os

    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option} must be a directory; {path!r} is a file")
    os.makedirs(path, exist_ok=True)
    return path
