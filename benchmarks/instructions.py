"""Instructions a scheduler's run executes, counted by Valgrind's cachegrind, in two trees.

CPU seconds on a shared machine move by ±20 % between runs of the same code; the
instructions a run executes move less (hash seed fixed, address randomization off where
``setarch`` is found), but not nothing: counts of one unchanged run taken minutes apart
differed by up to 5 %, two started together by 0.2–0.4 %. Read a ratio as a change only
well outside that, and compare counts taken together. For
each tree — the working tree and a git revision (``--rev``, exported to a temporary folder)
— every scheduler runs on ``engine_speed``'s trace (ShareGPT lengths, load 0.8, its
scheduler and settings) under ``valgrind --tool=cachegrind --cache-sim=no``, once whole and
once stopped before ``simulate``; the difference is the run's instructions (imports and the
trace's sampling left out). Prints one markdown row per scheduler and setting: the
instructions in each tree and their ratio. Instructions are not time (a cache miss costs
no instruction), so a change is judged by both: the count for its direction, CPU seconds
alternated in one window for its size. Needs ``valgrind`` on the path; each count runs the
scheduler about 50 times slower than natively.

Run from the repository root: ``python -m benchmarks.instructions [-n 3000] [--rev HEAD]
NAME[:MEMORY] ...`` (``NAME``: a scheduler of ``engine_speed``; ``MEMORY``: its KV limit in
tokens, none without), e.g. ``python -m benchmarks.instructions fcfs-restart:30000 vllm-v1``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import engine_speed as es

ROOT = Path(__file__).resolve().parent.parent

#: the run counted, as ``python -c`` runs it in a tree (argv: name, memory, n, skip)
CHILD = """
import sys, warnings
warnings.simplefilter("ignore")
import queuetheory as qt
from benchmarks import engine_speed as es
from pyserq_driver import TIME
name, memory, n, skip = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
arrival, prompt, output = es.trace(n, True, 0.8)
limit = None if memory == "none" else max(int(memory), int((prompt + output).max()))
policy, workload, first = es.scheduler(name, arrival, prompt, output, limit)
if not skip:
    qt.simulate(workload, policy, TIME, memory=limit, first_token=first).metrics
"""


def count(tree: Path, name: str, memory: str, n: int, skip: bool) -> int:
    """Instructions of one ``python -c CHILD`` in ``tree`` under cachegrind."""
    env = dict(os.environ, PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join(str(tree / p) for p in ("", "tests", "benchmarks")))
    fixed = ["setarch", "-R"] if shutil.which("setarch") else []   # no address randomization
    out = subprocess.run(
        [*fixed, "valgrind", "--tool=cachegrind", "--cache-sim=no",
         "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", CHILD, name, memory, str(n), "1" if skip else "0"],
        cwd=tree, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in cachegrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def run_instructions(tree: Path, name: str, memory: str, n: int) -> int:
    """The run's own instructions: the whole program less the one stopped before it."""
    return count(tree, name, memory, n, False) - count(tree, name, memory, n, True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", help="NAME or NAME:MEMORY")
    parser.add_argument("-n", type=int, default=3000, help="requests (default 3000)")
    parser.add_argument("--rev", default="HEAD", help="the revision to compare with")
    args = parser.parse_args()
    rows = [(name, memory or "none") for name, _, memory in
            (row.partition(":") for row in args.rows)]
    known = [*es.POLICIES, *es.AO]
    for name, memory in rows:
        if name not in known:
            parser.error(f"rows: {name!r} is not a scheduler of engine_speed ({', '.join(known)})")
        if memory != "none" and not (memory.isdigit() and int(memory) > 0):
            parser.error(f"rows: {name}:{memory}: the KV limit must be a positive integer")
    if args.n < 1:
        parser.error(f"-n={args.n}: at least one request")
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not on the path")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        archive = subprocess.run(["git", "archive", args.rev], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        print(f"| scheduler | KV limit | instructions at {args.rev} | instructions here "
              "| here / there |")
        print("|---|---:|---:|---:|---:|")
        for name, memory in rows:
            there = run_instructions(base, name, memory, args.n)
            here = run_instructions(ROOT, name, memory, args.n)
            print(f"| {name} | {memory if memory != 'none' else '—'} | {there:,} | {here:,} "
                  f"| {here / there:.3f} |", flush=True)


if __name__ == "__main__":
    main()
