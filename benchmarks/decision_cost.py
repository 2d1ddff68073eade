"""Issue 33: where a stepping scheduler's CPU goes — its decisions, or the engine's step.

Each scheduler runs once as shipped with every answer it gives the engine recorded: the
batches of ``schedule`` and the promises ``steady``, ``steady_chunk``, ``drains``,
``decodes_through`` and ``idles_through`` (:class:`Recorded`). A
:class:`Replay` of those answers then runs on the same trace: the engine does the same work
— the records are checked equal to the first run's — while each decision costs a list
lookup. The difference is what the decisions cost; the replay is the engine's own cost of
the run.

One row per scheduler and setting (``engine_speed``'s, ShareGPT lengths at load 0.8): the
iterations, the decisions (calls of ``schedule``), CPU seconds as shipped and replayed, µs
per decision of each, and the budget the issue's 5 × 10⁴ iterations per CPU second leaves
per decision (``iterations / decisions × 20 µs``): a row whose replay alone costs more per
decision than that budget cannot reach the target on this engine, whatever the policy
does, without fewer decisions. Schedulers that run a bulk rule are left out (their
decisions are a kernel's, not ``schedule``'s).

``python -m benchmarks.decision_cost [-n 10000] [--memory 30000] [--repeat 2] [NAME ...]``
(CPU seconds: the least of ``--repeat`` runs, shipped and replay alternating).
"""

from __future__ import annotations

import argparse
import time
from collections import deque

import numpy as np

import queuetheory as qt
from benchmarks.engine_speed import AO, POLICIES, scheduler, supported, trace

#: the engine's questions to a policy, each answered by a method of that name
ANSWERS = ("schedule", "steady", "steady_chunk", "drains", "decodes_through", "idles_through")
#: the issue's target: iterations per CPU second
TARGET = 5e4


class Recorded:
    """Wraps a policy's instance so that every answer of :data:`ANSWERS` is kept, in order.

    Parameters
    ----------
    policy : Policy
        The scheduler as shipped (its methods are wrapped on the instance).
    """

    def __init__(self, policy):
        self.policy = policy
        self.answers = {name: [] for name in ANSWERS}
        for name in ANSWERS:
            method, kept = getattr(policy, name), self.answers[name]

            def answer(*args, _method=method, _kept=kept):
                out = _method(*args)
                _kept.append(out)
                return out

            setattr(policy, name, answer)


class Replay(qt.policies.Policy):
    """The answers a :class:`Recorded` run gave, handed back in the same order.

    Parameters
    ----------
    recorded : Recorded
        The first run's answers.
    """

    def __init__(self, recorded):
        shipped = recorded.policy
        self.token_budget = getattr(shipped, "token_budget", None)
        self.preemption = shipped.preemption
        self.no_token_budget = shipped.no_token_budget
        self._answers = recorded.answers

    def _reset(self):
        self._left = {name: deque(kept) for name, kept in self._answers.items()}

    def schedule(self, state):
        return self._left["schedule"].popleft()

    def steady(self, state, batch):
        return self._left["steady"].popleft()

    def steady_chunk(self, state, batch):
        return self._left["steady_chunk"].popleft()

    def drains(self, state):
        return self._left["drains"].popleft()

    def decodes_through(self, state, batch):
        return self._left["decodes_through"].popleft()

    def idles_through(self, state):
        return self._left["idles_through"].popleft()


def _run(name, arrival, prompt, output, memory, policy=None):
    """``name`` on the trace as ``engine_speed`` runs it (``policy``: instead of a fresh
    one); the result and its CPU seconds."""
    shipped, workload, first = scheduler(name, arrival, prompt, output, memory)
    from pyserq_driver import TIME

    c0 = time.process_time()
    res = qt.simulate(workload, policy or shipped, TIME, memory=memory,
                      first_token=first)
    return res, time.process_time() - c0


def _same(a, b) -> bool:
    return (a.requests.equals(b.requests) and a.batches.equals(b.batches)
            and a.end_time == b.end_time and np.array_equal(a.tbt.counts, b.tbt.counts))


def row(name, arrival, prompt, output, memory, repeat: int = 2) -> dict | None:
    """The decisions' and the engine's CPU of one scheduler and setting, or ``None`` where
    it runs a bulk rule (fewer decisions than a tenth of its iterations)."""
    shipped = scheduler(name, arrival, prompt, output, memory)[0]
    recorded = Recorded(shipped)
    res, cpu = _run(name, arrival, prompt, output, memory, shipped)
    decisions = len(recorded.answers["schedule"])
    if decisions < res.iterations / 10:
        return None
    replay = Replay(recorded)
    cpu_shipped, cpu_replay = [cpu], []
    for k in range(repeat):
        again, c = _run(name, arrival, prompt, output, memory, replay)
        if not _same(res, again):
            raise AssertionError(f"{name}: the replay's records differ from the run's")
        cpu_replay.append(c)
        if k + 1 < repeat:
            cpu_shipped.append(_run(name, arrival, prompt, output, memory)[1])
    shipped_s, replay_s = min(cpu_shipped), min(cpu_replay)
    return {"scheduler": name, "KV limit": memory or "—", "iterations": res.iterations,
            "decisions": decisions, "decisions / iteration": decisions / res.iterations,
            "CPU s": shipped_s, "replay CPU s": replay_s,
            "µs / decision": 1e6 * shipped_s / decisions,
            "engine µs / decision": 1e6 * replay_s / decisions,
            "policy share": 1 - replay_s / shipped_s,
            "budget µs / decision": 1e6 * res.iterations / decisions / TARGET}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="schedulers (default: every one)")
    parser.add_argument("-n", type=int, default=10_000)
    parser.add_argument("--memory", type=int, default=30_000)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    known = [*POLICIES, *AO]
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        parser.error(f"names={unknown}: not schedulers of engine_speed ({', '.join(known)})")
    names = args.names or known
    arrival, prompt, output = trace(args.n, True, args.load)
    # as engine_speed's table: the limit holds the longest request
    limit = max(args.memory, int((prompt + output).max()))
    columns = None
    for memory in (None, limit):
        for name in names:
            if not supported(name, memory, arrival, prompt, output):
                continue
            out = row(name, arrival, prompt, output, memory, args.repeat)
            if out is None:
                continue
            if columns is None:
                columns = list(out)
                print("| " + " | ".join(columns) + " |")
                print("|---|" + "---:|" * (len(columns) - 1))
            print("| " + " | ".join(f"{v:,}" if isinstance(v, int) else
                                    f"{v:.3g}" if isinstance(v, float) else str(v)
                                    for v in out.values()) + " |", flush=True)


if __name__ == "__main__":
    main()
