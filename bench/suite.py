"""One suite process: set Django up on one database and run the named benchmarks against it.

`bench/__main__.py` starts one of these per database (settings are read once per process), with the
shared Redis and the machine description; each benchmark writes its own JSON file.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from .context import BenchContext
from .sockets import stop_daphne

__all__ = ("BENCHMARKS", "main")

# benchmark name -> (module, cases whose per-item cost must stay flat across sizes)
BENCHMARKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "hosting": ("bench.hosting", ()),
    "observer": ("bench.observer", ("observe", "resume")),
    "journal": ("bench.journal", ("write",)),
    "replay": ("bench.replay", ("replay",)),
    "live": ("bench.live", ()),
    "browser": ("bench.browser", ()),
    "viewers": ("bench.viewers", ()),
    "concurrency": ("bench.concurrency", ()),
    "group_commit": ("bench.group_commit", ()),
    "execution_list": ("bench.execution_list", ()),
    "bundles": ("bench.bundles", ("export full", "export redacted", "import full")),
    "model_replay": ("bench.model_replay", ()),
    "retention": ("bench.retention", ()),
    "webhooks": ("bench.webhooks", ()),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.suite")
    parser.add_argument("--database", required=True, help="label: sqlite or postgresql")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--benchmarks", required=True, help="comma-separated names")
    parser.add_argument("--sizes", required=True, help="comma-separated size labels, e.g. 1k,10k,100k")
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--machine", default="{}", help="machine description (JSON)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)

    from .host import configure

    configure(args.database_url, args.redis_url)
    context = BenchContext(
        quick=args.quick,
        repeats=args.repeats,
        sizes=tuple(args.sizes.split(",")),
        database=args.database,
        redis_url=args.redis_url,
        output=args.output,
        machine=json.loads(args.machine),
    )
    try:
        for name in args.benchmarks.split(","):
            module_name, growth_of = BENCHMARKS[name]
            print(f"==> {name} on {args.database}", flush=True)
            report = importlib.import_module(module_name).run(context)
            path = report.write(args.output, context.machine, growth_of=growth_of)
            print(f"    wrote {path} ({time.time() - report.started:.0f} s)", flush=True)
    finally:
        stop_daphne()
    return 0


if __name__ == "__main__":
    sys.exit(main())
