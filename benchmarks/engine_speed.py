"""Engine speed at scale: a scheduler with token budget 512 at a given load on one core.

Prompt and output lengths lognormal with medians 256 and 256 tokens (σ = 0.8), or the
ShareGPT lengths shipped in ``queuetheory.data`` with ``--sharegpt``; the anchor time model
(16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode token, in µs); the arrival rate is
set by the load (:meth:`Workload.from_lengths`); the real engines' first-token convention. The
scheduler is one of ``POLICIES``; ``--memory M`` adds a KV-cache limit of ``M`` tokens
(vLLM's recompute preemption). With ``--pyserq`` (Sarathi, vLLM, Orca, iteration-level
FasterTransformer, and StaticPriority with one class and KFCFS, which decide as FCFS
Sarathi), pyserq runs the same trace in the same process, with the program
``tests/test_oracle_pyserq.py`` checks to be identical (its compile step not timed). Prints
wall and CPU time, iterations/s and peak memory.

``--policy wait`` and ``nested-wait`` run Ao et al.'s schedulers in their paper's setting
(:func:`ao_et_al`): their convention ``first_token="decode"``, output lengths binned by 50
decode stages (§6.2), thresholds of the paper's rules with the batch limit ``B = 512``.

``--ciw`` runs instead the single-server queue of ``tests/test_oracle_ciw.py`` (Sarathi with
``max_reqs=1``: 512-token prompts, geometric outputs of mean 64, Poisson arrivals at load 0.8,
``-n`` customers) and Ciw on the same arrival and service times in the same run.

Run from the repository root: ``python -m benchmarks.engine_speed [-n 10000 100000]
[--sharegpt] [--policy sarathi|...] [--memory M] [--load 0.8] [--pyserq] [--fast-path off]``,
``python -m benchmarks.engine_speed --ciw -n 20000``.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from scipy import stats

import queuetheory as qt
from benchmarks.anchor import ours, show, theirs

# vLLM without chunked prefill needs a budget of at least the longest prefill (as vLLM itself
# requires max_num_batched_tokens >= max_model_len): the longest prompt plus output of the
# trace, at least 2048
POLICIES = {
    "sarathi": lambda b: qt.policies.Sarathi(512),
    "sarathi-maxreqs": lambda b: qt.policies.Sarathi(512, max_reqs=32),
    "orca": lambda b: qt.policies.Orca(512),
    "vllm": lambda b: qt.policies.VLLMVanilla(b),
    "static": lambda b: qt.policies.StaticPriority(512, [0]),
    "ft": lambda b: qt.policies.FasterTransformer(512),
    # request-level FasterTransformer: cohorts of 64 (no KV-memory rule)
    "ft-request": lambda b: qt.policies.FasterTransformer(512, mode="request", max_reqs=64),
    # (K_p, K_d)-FCFS around Sarathi, windows as wide as the budget
    "kfcfs": lambda b: qt.policies.KFCFS(qt.policies.Sarathi(512), 512, 512),
    # static priority between two classes (CLASSES: each request drawn to one), class 1 first
    "static2": lambda b: qt.policies.StaticPriority(512, (1, 0)),
    # Chen et al.'s and Jaillet et al.'s schedulers need --memory
    "amax": lambda b: qt.policies.AMax(),
    "amin": lambda b: qt.policies.AMin(),
    "mcsf": lambda b: qt.policies.MCSF(),
    "aell": lambda b: qt.policies.AEll(),
    "adaptive": lambda b: qt.policies.AdaptiveRobust(),
    "hsf": lambda b: qt.policies.HSF(),
    "arandom": lambda b: qt.policies.ARandom(),
    "mcsf-fcfs": lambda b: qt.policies.FCFS(),
    "alpha": lambda b: qt.policies.AlphaProtection(0.1),
    # Bari et al.'s SLAI, its TBT target 0.5 s in the time model's µs
    "slai": lambda b: qt.policies.SLAI(512, tbt=(5e5,)),
    # Bari et al.'s tiled schedulers (tile t* = (128, 256, 32); no KV-memory rule)
    "rad": lambda b: qt.policies.RAD((128, 256, 32)),
    "cycle": lambda b: qt.policies.CycleScheduler((128, 256, 32), n=256),
    "request-level": lambda b: qt.policies.RequestLevel(256),
    # vLLM v1 keeps its own KV blocks (run without --memory)
    "vllm-v1": lambda b: qt.policies.VLLMV1(256, 2048),
}
# Ao et al.'s schedulers, in their paper's setting (:func:`ao_et_al`)
AO = ("wait", "nested-wait", "fcfs-restart")


# policies that need requests of several classes: how many, drawn uniformly per request
CLASSES = {"static2": 2}
# the pyserq program of the same scheduler, where the driver has one: StaticPriority with one
# class and KFCFS with windows of at least the budget decide as FCFS Sarathi
PYSERQ = {"sarathi": "SARATHI_FCFS", "vllm": "VLLM", "static": "SARATHI_FCFS",
          "kfcfs": "SARATHI_FCFS", "orca": "ORCA", "ft": "FASTER_TRANSFORMER"}


def trace(n: int, sharegpt: bool, load: float, seed: int = 0):
    from pyserq_driver import TIME

    if sharegpt:
        prompt, output = qt.data.sharegpt_lengths()
    else:
        prompt = output = stats.lognorm(s=0.8, scale=256)
    wl = qt.Workload.from_lengths(prompt, output, load=load, time_model=TIME, token_budget=512)
    tr = wl.sample(n_requests=n, seed=seed)
    return tr.arrival, tr.prompt, tr.output


def ao_et_al(name: str, arrival, prompt, output, fast_path: bool = True,
             memory=None) -> dict:
    """WAIT or Nested WAIT (Ao et al.) on the trace, timed as :func:`benchmarks.anchor.ours`.

    The paper's §6.2 setting: output lengths in bins of 50 decode stages — WAIT's types (a
    request's type is its bin) and Nested WAIT's segments (boundaries 50, 100, … up to the
    longest output) — and thresholds with a batch limit ``B = 512``: WAIT the §6.1 rule
    ``n_j = max(1, ⌊Bρ_j/(l'_j+1)⌋)`` (``l'_j`` the bin's last stage, ``ρ_j`` its share),
    Nested WAIT the tail-sum rule of (10) in the authors' form ``⌈BΛ_i/Σ_k w_k Λ_k⌉``.
    Their convention ``first_token="decode"``. With ``memory`` the schedulers keep to it
    (WAIT without classes and Nested WAIT ``overflow="gate"``, module notes of
    :mod:`queuetheory.policies.wait`); without it Nested WAIT is ``overflow="soft"``.
    ``"fcfs-restart"`` is the baseline of Props. 4–5 on the same trace."""
    from pyserq_driver import TIME

    policy, trace = ao_policy(name, arrival, prompt, output, memory)
    t0, c0 = time.perf_counter(), time.process_time()
    res = qt.simulate(trace, policy, TIME, memory=memory, fast_path=fast_path,
                      first_token="decode")
    m = res.metrics
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "iterations": m["iterations"],
            "iterations_per_cpu_s": m["iterations"] / cpu, "completed": m["completed"],
            "mean_latency_s": float(res.requests["latency"].mean()) / 1e6}


def ao_policy(name: str, arrival, prompt, output, memory=None):
    """The policy and trace of :func:`ao_et_al`."""

    width, B = 50, 512
    kind = (output - 1) // width
    share = np.bincount(kind).astype(float)
    if name == "fcfs-restart":
        return qt.policies.FCFSRestart(), qt.Workload.from_arrays(arrival, prompt, output)
    if name == "wait":
        classes = [qt.RequestClass(prompt=int(prompt.mean()), output=width * (j + 1),
                                   rate=max(r, 1e-9)) for j, r in enumerate(share)]
        policy = qt.policies.WAIT(qt.fluid.wait_thresholds(classes, 1.0, 0.0, rule="paper",
                                                           batch_limit=B))
        trace = qt.Workload.from_arrays(arrival, prompt, output, kind)
    else:
        seg = qt.fluid.Segments(int(prompt.mean()), width * np.arange(1, share.size + 1), share)
        policy = qt.policies.NestedWAIT(seg, qt.fluid.nested_thresholds(
            seg, 1.0, 0.0, rule="tail_sum", batch_limit=B),
            overflow="soft" if memory is None else "gate")
        trace = qt.Workload.from_arrays(arrival, prompt, output)
    return policy, trace


def single_server(n: int, load: float = 0.8, seed: int = 5):
    """The M/G/1 sample path of ``tests/test_oracle_ciw.py``, timed in ``simulate`` and in
    Ciw (CPU seconds; departures compared)."""
    from test_oracle_ciw import BUDGET, TIME, ciw_departures, service_time

    rng = np.random.default_rng(seed)
    prompt = np.full(n, 512)
    output = rng.geometric(1 / 64, n)
    service = np.array([service_time(p, o) for p, o in zip(prompt, output, strict=True)])
    arrival = np.cumsum(rng.exponential(service.mean() / load, n))
    trace = qt.Workload.from_arrays(arrival, prompt, output)
    c0 = time.process_time()
    res = qt.simulate(trace, qt.policies.Sarathi(BUDGET, max_reqs=1), TIME,
                      first_token="prefill")
    iterations = res.metrics["iterations"]
    ours = time.process_time() - c0
    c0 = time.process_time()
    _, exit_dates = ciw_departures(arrival, service)
    theirs = time.process_time() - c0
    gap = np.abs(res.requests["finish"].to_numpy() - exit_dates).max()
    print(f"single-server queue, {n:,} customers, load {load}: {iterations:,} iterations; "
          f"simulate {ours:.3f} s CPU, Ciw {theirs:.3f} s CPU, simulate / Ciw = "
          f"{ours / theirs:.2f}; largest departure difference {gap:.2g}")


def budget_and_classes(name: str, prompt, output):
    """The token budget of scheduler ``name`` on the trace (vanilla vLLM's: the longest
    request, at least 2048) and the requests' classes (``None``: one)."""
    budget = max(2048, int((prompt + output).max())) if name == "vllm" else 512
    k = CLASSES.get(name, 1)
    cls = np.random.default_rng(1).integers(0, k, len(prompt)) if k > 1 else None
    return budget, cls


def scheduler(name: str, arrival, prompt, output, memory=None):
    """The policy, the workload and the first-token convention of ``name`` on the trace, as
    :func:`run_one` runs it."""
    if name in AO:
        policy, trace = ao_policy(name, arrival, prompt, output, memory)
        return policy, trace, "decode"
    budget, cls = budget_and_classes(name, prompt, output)
    return (POLICIES[name](budget), qt.Workload.from_arrays(arrival, prompt, output, cls),
            "prefill")


def run_one(name: str, arrival, prompt, output, memory, fast_path: bool = True) -> dict:
    """One scheduler on the trace (``memory``: the KV limit or ``None``), timed."""
    if name in AO:
        return ao_et_al(name, arrival, prompt, output, fast_path, memory)
    budget, cls = budget_and_classes(name, prompt, output)
    out = ours(arrival, prompt, output, POLICIES[name](budget), memory, fast_path, cls=cls)
    out["iterations_per_cpu_s"] = out["iterations"] / out["cpu_s"]
    return out


def supported(name: str, memory, arrival, prompt, output) -> bool:
    """Does the scheduler run with this KV ``memory`` (its own ``supports``)?"""
    if name in AO:
        policy = ao_policy(name, arrival, prompt, output, memory)[0]
        first = "decode"
    else:
        policy, first = POLICIES[name](512), "prefill"
    return policy.supports(memory=memory, first_token=first) is None


def table(ns, memory: int, load: float, names, fast_path: bool = True,
          max_cpu: float = 60.0):
    """``--all``: every scheduler of ``names`` on the ShareGPT trace, without and with the KV
    limit ``memory`` where it runs there; one markdown row per scheduler and setting: CPU
    seconds at each size of ``ns``, iterations per CPU second at the smallest, FCFS Sarathi's
    beside it in the same run, the cost exponent ``d log CPU / d log n`` (least squares
    over the sizes run) and the requests left unfinished at the smallest size (a run that
    stops early, e.g. α-protection's loop rule, times fewer iterations). A size is skipped
    (``—``) when the previous one's CPU, scaled linearly, would pass ``max_cpu`` seconds."""
    ns = sorted(ns)
    traces = {n: trace(n, True, load) for n in ns}
    print("| scheduler | KV limit | " + " | ".join(f"CPU s at {n:,}" for n in ns)
          + f" | iterations at {ns[0]:,} | it / CPU s | Sarathi it / CPU s | exponent "
          f"| unfinished at {ns[0]:,} |")
    print("|---|---:|" + "---:|" * (len(ns) + 5))
    for mem in (None, memory):
        arrival, prompt, output = traces[ns[0]]
        lim = mem and max(mem, int(max((t[1] + t[2]).max() for t in traces.values())))
        ref = run_one("sarathi", arrival, prompt, output, lim)
        for name in names:
            if not supported(name, lim, arrival, prompt, output):
                continue
            cpu, first = {}, None
            for n in ns:
                if cpu and max(cpu.values()) * n / max(cpu) > max_cpu:
                    break
                out = run_one(name, *traces[n], lim, fast_path)
                cpu[n] = out["cpu_s"]
                first = first or out
            slope = (np.polyfit(np.log(list(cpu)), np.log(list(cpu.values())), 1)[0]
                     if len(cpu) > 1 else float("nan"))
            cells = " | ".join(f"{cpu[n]:.3f}" if n in cpu else "—" for n in ns)
            print(f"| {name} | {lim or '—'} | {cells} | {first['iterations']:,} | "
                  f"{first['iterations_per_cpu_s']:.3g} | "
                  f"{ref['iterations'] / ref['cpu_s']:.3g} | {slope:.2f} | "
                  f"{ns[0] - first['completed']:,} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--sharegpt", action="store_true")
    ap.add_argument("--policy", choices=(*POLICIES, *AO), default="sarathi")
    ap.add_argument("--all", nargs="*", metavar="POLICY", default=None, choices=(*POLICIES, *AO),
                    help="a table of every scheduler (or those named), ShareGPT lengths, "
                         "without and with --memory (default 30000)")
    ap.add_argument("--memory", type=int, default=None)
    ap.add_argument("--max-cpu", type=float, default=60.0,
                    help="--all: skip a size whose CPU, scaled from the last, would pass this")
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--pyserq", action="store_true")
    ap.add_argument("--fast-path", choices=("on", "off"), default="on")
    ap.add_argument("--ciw", action="store_true")
    args = ap.parse_args()
    if args.ciw:
        single_server(1000)          # warm-up: first-use imports of both simulators
        for n in args.n:
            single_server(n)
        return
    if args.all is not None:
        table(args.n, args.memory or 30_000, args.load, args.all or [*POLICIES, *AO],
              args.fast_path == "on", args.max_cpu)
        return
    for n in args.n:
        arrival, prompt, output = trace(n, args.sharegpt, args.load)
        if args.policy in AO:
            print(f"n={n:,} policy={args.policy} memory={args.memory}")
            show("simulate", ao_et_al(args.policy, arrival, prompt, output,
                                      args.fast_path == "on", args.memory))
            continue
        memory = args.memory and max(args.memory, int((prompt + output).max()))
        budget = max(2048, int((prompt + output).max())) if args.policy == "vllm" else 512
        print(f"n={n:,} policy={args.policy} budget={budget} memory={memory}")
        k = CLASSES.get(args.policy, 1)
        cls = np.random.default_rng(1).integers(0, k, n) if k > 1 else None
        mine = ours(arrival, prompt, output, POLICIES[args.policy](budget), memory,
                    args.fast_path == "on", cls=cls)
        show("simulate", mine)
        if args.pyserq and args.policy not in PYSERQ:
            print("  pyserq: the driver has no program for this scheduler")
        elif args.pyserq:
            import pyserq_driver

            program = getattr(pyserq_driver, PYSERQ[args.policy])
            ref = theirs(arrival, prompt, output, program, budget, memory)
            show("pyserq", ref)
            print(f"  same latencies: {(mine['latency'] == ref['latency']).all()};  "
                  f"pyserq / simulate (wall) = {ref['wall_s'] / mine['wall_s']:.2f}, "
                  f"(CPU) = {ref['cpu_s'] / mine['cpu_s']:.2f}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
