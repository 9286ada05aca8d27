"""Run every benchmark (``make bench``): each writes tests/benchmarks/results/<name>.json.

``python -m tests.benchmarks codec bus`` runs only those named.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import tests.benchmarks as pkg


def main(argv: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("bench_"))
    wanted = [f"bench_{a}" if not a.startswith("bench_") else a for a in argv] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {[n[6:] for n in names]}", file=sys.stderr)
        return 2
    failed = []
    for name in wanted:
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            sys.argv = [name]  # each benchmark parses its own options: run it with its defaults
            importlib.import_module(f"tests.benchmarks.{name}").main()
        except Exception:
            traceback.print_exc()
            failed.append(name)
        print(f"== {name} took {time.perf_counter() - t0:.1f} s", flush=True)
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
