"""Benchmarks: one module per benchmark, each with ``main(argv)``; run as ``kernelforms bench NAME``."""


def cache_directory(path: str, option: str = "--cache") -> str:
    """``path`` as a benchmark's cache directory, created if missing; a ``ValueError`` naming
    ``option`` when it is a file (raised before any work, not after building what it would keep)."""
    import os

    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option} must be a directory; {path!r} is a file")
    os.makedirs(path, exist_ok=True)
    return path


def _parser_class():
    import argparse

    class BenchParser(argparse.ArgumentParser):
        """An ``ArgumentParser`` whose error names an unknown flag given before the command
        (``bench admm --bogus-flag`` said "the following arguments are required: cmd")."""

        def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
            import sys

            self._given = list(sys.argv[1:] if args is None else args)
            return super().parse_known_args(self._given, namespace)

        def error(self, message):  # type: ignore[override]
            given = getattr(self, "_given", [])
            commands: list[str] = []
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction):
                    commands += list(action.choices)
            known = set(self._option_string_actions)
            unknown = [a for a in given if a.startswith("-") and a.split("=", 1)[0] not in known]
            if commands and unknown and not any(a in commands for a in given):
                message = (f"unrecognized arguments: {' '.join(unknown)}. Give a command first "
                           f"({', '.join(commands)}), then its options (`{self.prog} COMMAND --help`)")
            super().error(message)

    return BenchParser


#: the argument parser of every benchmark (see :func:`_parser_class`)
BenchParser = _parser_class()
