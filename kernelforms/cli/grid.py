"""``kernelforms grid``: many instances on local processes or a dask.distributed cluster
(its scheduler probed in bounded time first)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from .args import (
    EXIT_AGREE,
    EXIT_BAD_INPUT,
    EXIT_DISAGREE,
    EXIT_INTERRUPTED,
    _build_recipe,
    _check_flags,
    _check_outputs,
    _exit_code,
    _method_options,
    _recipe,
    _write_failed,
)


#: seconds the CLI waits for a dask scheduler to answer its first request
SCHEDULER_TIMEOUT = 15.0


def _probe_scheduler(address: str, timeout: float) -> None:
    """Ask the scheduler at ``address`` for its identity, the whole exchange bounded by
    ``timeout`` seconds: a server that accepts the connection but never answers, or answers
    with bytes that are not dask's protocol (a length header of exbibytes), fails here, in
    bounded time and memory, before a Client would wait for it without end."""
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    async def ask() -> Any:
        comm = await connect(address, timeout=timeout,
                             **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def bounded() -> Any:
        return await asyncio.wait_for(ask(), timeout)

    try:
        reply = asyncio.run(bounded())
    except (asyncio.TimeoutError, TimeoutError):
        raise TimeoutError(f"no answer within {timeout:g} s (the address accepts connections, but "
                           "nothing there speaks dask's protocol)") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ValueError(f"the server there is not a dask scheduler (it answered {str(reply)[:80]!r})")


def _connect(address: str, timeout: float | None = None) -> Any:
    """A dask.distributed Client of the scheduler at ``address`` (a usage error when dask is
    missing, the address is not one, or the scheduler does not answer in ``timeout`` s)."""
    from ..errors import OptionError

    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    try:
        from distributed import Client
    except ImportError:
        raise OptionError("--scheduler needs dask.distributed: pip install 'kernelforms[dask]' "
                          "(or 'dask[distributed]')") from None

    def refuse(exc: BaseException, hint: str = "") -> OptionError:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return OptionError(f"--scheduler {address!r}: cannot connect to a dask scheduler there "
                           f"({type(exc).__name__}{': ' + why[:300] if why else ''}); "
                           + (hint or "give the address the scheduler prints, e.g. tcp://10.0.0.5:8786"))

    # the address and, for tcp, the port are checked first: a Client that fails to start
    # leaves threads behind that delay the exit of the command by many seconds
    hints = {"tls": "TLS needs the client's certificates: set them in dask's configuration "
                    "(distributed.comm.tls.ca-file, .client.cert, .client.key), or connect in Python "
                    "with Client(address, security=...) and pass it as compare_grid(executor=client)",
             "ucx": "the ucx protocol needs the distributed-ucxx package and a UCX-capable network; "
                    "the scheduler's tcp:// address works everywhere"}
    hint = hints.get(address.partition("://")[0].strip().lower(), "") if "://" in address else ""
    try:
        from distributed.comm import parse_address, parse_host_port, resolve_address

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # e.g. "the 'ucx' protocol was removed"
            resolved = resolve_address(address)
        scheme, loc = parse_address(resolved)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - an unknown scheme, a malformed address, a backend missing
        raise refuse(exc, hint) from None
    try:
        if scheme == "tcp":
            import socket

            socket.create_connection(parse_host_port(loc), timeout=10).close()
        _probe_scheduler(resolved, timeout)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - MemoryError from junk, TypeError from TLS, ...
        raise refuse(exc, hint) from None
    try:
        return Client(resolved, timeout=30)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        raise refuse(exc, hint) from None


def _cmd_grid(args: argparse.Namespace) -> int:
    from ..grid import compare_grid, format_grid
    from ..report import ReportWriteWarning

    _check_flags(args)
    for one, many in (("n_points", "sizes"), ("seed", "seeds")):
        if getattr(args, one) is not None and getattr(args, many) is not None:
            args._parser.error(f"argument --{many}: give --{many} or --{one.replace('_', '-')}, "
                               "not both")
    if args.scheduler is not None and args.workers is not None:
        args._parser.error("argument --workers: not used with --scheduler (the cluster's workers "
                           "run the instances)")
    options = _method_options(args)
    _check_outputs(args)
    base = _recipe(args)
    sizes = args.sizes or [base["n_points"]]
    seeds = args.seeds or [base["seed"]]
    recipes = [{**base, "n_points": n, "seed": s} for n in sizes for s in seeds]
    # built here, so that every bad instance is reported before anything runs, and so that
    # generated data sets are drawn at each size
    problems = [_build_recipe(r)[0] for r in recipes]
    client = _connect(args.scheduler) if args.scheduler is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ReportWriteWarning)
            reports = compare_grid(problems, args.methods, executor=client, max_workers=args.workers,
                                   rtol=args.rtol, vtol=args.vtol, time_limit=args.time_limit,
                                   certify=not args.no_certify,
                                   options=options or None, json_path=args.json, recipes=recipes)
    except KeyboardInterrupt:
        where = f"; finished instances are in {args.json}" if args.json else ""
        print(f"kernelforms: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if client is not None:
            client.close()
    write_errors = [w for w in caught if issubclass(w.category, ReportWriteWarning)]
    for w in caught:
        if w not in write_errors:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    print(format_grid(reports))
    codes = [_exit_code(r) for r in reports]
    verdicts = [r.verdict for r in reports]
    counts = {v: verdicts.count(v) for v in ("agree_partial", "unverified", "disagree") if v in verdicts}
    print(f"{verdicts.count('agree')} of {len(reports)} instances agree (rtol {args.rtol:g})"
          + "".join(f"; {n} {v.replace('_', ' ')}" for v, n in counts.items()))
    lost = [k for k, r in enumerate(reports) if any(x.message.startswith("worker lost") for x in r.rows)]
    if lost:
        print(f"worker lost (error rows): instance(s) {', '.join(map(str, lost))}")
    broken = [k for k, r in enumerate(reports) if k not in lost and not r.complete and r.rows
              and all(x.status.value == "error" for x in r.rows)]
    for k in broken:
        print(f"instance {k} did not run (error rows): {reports[k].rows[0].message}")
    failed = False
    if args.json:
        if write_errors:
            print(f"kernelforms: error: {write_errors[0].message} (the table above is complete)",
                  file=sys.stderr)
            failed = True
        else:
            print(f"wrote {args.json}")
    if args.plot:
        from ..plots import scaling

        try:
            scaling(reports, args.plot, title=f"{args.problem} on {args.dataset}")
            print(f"wrote {args.plot}")
        except (OSError, ValueError) as exc:
            _write_failed("figure", args.plot, exc)
            failed = True
    if failed:
        return EXIT_BAD_INPUT
    return max(codes, key=lambda c: (c == EXIT_DISAGREE, c)) if codes else EXIT_AGREE
