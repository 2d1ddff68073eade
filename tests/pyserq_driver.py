"""A driver for pyserq 0.1.6, an independent serving simulator written in Rust, on a fixed
trace: the oracle of ``test_oracle_pyserq.py`` and the reference timed by ``benchmarks/``.

Both run the real engines' conventions: the iteration that finishes a prompt emits the first
output token, and a preempted request keeps its tokens and prefills prompt plus generated
tokens again once they all fit in memory (vLLM's recompute preemption). pyserq's workloads draw
their own arrivals, so every request arrives at time 0, waits its trace arrival time on an
infinite-server delay stage, and only then reaches the engine; latencies are measured from
there, and pyserq's client TTFT (from time 0) less the arrival gives the TTFT. Time unit: µs.
"""

from pathlib import Path

import numpy as np
import pyserq

import queuetheory as qt

# 16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode token, in µs
C0, PER_PREFILL, PER_DECODE = 16100.0, 57.8, 39.5
TIME = qt.AffineTokenTime(c=C0, per_prefill=PER_PREFILL, per_decode=PER_DECODE)

# Sarathi-Serve: decodes first, then chunked prefills of the running requests, then new ones
# while the budget lasts, each admitted only if its known tokens (prompt plus any generated
# before a preemption) fit in KV memory, none while a preempted request waits.
SARATHI = """
    scheduler {
      advance running decode first;
      admit waiting while (running.preempted == 0) taking reqs (1), kv (request.known);
    }
"""
# The same under FCFS, written in admission order: the only running request that can still be
# prefilling is the youngest (a chunk is cut only where the budget ends), so admission order
# puts every decode first. pyserq's fastest program for Sarathi.
SARATHI_FCFS = """
    scheduler {
      advance running;
      admit waiting while (running.preempted == 0) taking reqs (1), kv (request.known);
    }
"""
# vLLM without chunked prefill: a prefill-only batch of whole prompts whenever one can start,
# else a decode-only batch.
VLLM = """
    granule inf;
    scheduler {
      advance running only (!decoding);
      admit waiting while (running.preempted == 0) taking reqs (1), kv (request.known);
      if (batch.tokens == 0) { advance running; }
    }
"""
# Orca: the prompts first (the running one part-way through its prefill, then new ones while
# the budget lasts, the last chunked), then one decode token for each running request in
# decode, oldest first, while the budget lasts.
ORCA = """
    scheduler {
      advance running only (!decoding);
      admit waiting while (running.preempted == 0) taking reqs (1), kv (request.known);
      advance running only (decoding);
    }
"""
# FasterTransformer (iteration-level): a decode-only batch whenever a request decodes, else a
# prefill-only batch of prompts (the last chunked).
FASTER_TRANSFORMER = """
    scheduler {
      advance running only (running.decoding > 0 ? decoding : !decoding);
      admit waiting only (running.decoding > 0 ? decoding : !decoding)
        while (running.preempted == 0) taking reqs (1), kv (request.known);
    }
"""

PROGRAM = """
fn main() {{
  device gpu {{ kv cap {kv_cap}; }}
  engine llm on gpu {{
    reqs cap 1000000000;
    tokens cap {budget};
    {scheduler}
    worker {{
      forward ({c0!r} + {ap!r} * batch.prefilled + {ad!r} * (batch.tokens - batch.prefilled));
    }}
  }}
  pool kv on gpu {{ block 1; evict lru; preempt lifo; }}
  pool reqs on llm {{ queue fifo; }}
  stage tool : delay;
  server (new, out, think) {{
    tool think;
    set t0 = now;
    llm (new, out);
    observe e2e = now - t0;
  }}
}}
"""

WORKLOAD = """
workload {{
  arrive batch({n});
  trace "{csv}" ordered;
  send (new, out, think);
}}
"""


def _per_request(stat, n):
    out = np.full(n, np.nan)
    out[np.asarray(stat.sessions, dtype=np.int64)] = stat.samples
    return out


def compile_pyserq(folder, arrival, prompt, output, *, scheduler, budget, memory):
    """The compiled pyserq program and workload for this trace (files written in ``folder``)."""
    folder = Path(folder)
    csv = folder / "trace.csv"
    rows = [f"{i},0,{p},{o},{a!r}" for i, (a, p, o) in
            enumerate(zip(arrival.tolist(), prompt.tolist(), output.tolist(), strict=True))]
    csv.write_text("session,turn,new,out,think\n" + "\n".join(rows) + "\n")
    program, workload = folder / "program.sq", folder / "workload.sq"
    program.write_text(PROGRAM.format(kv_cap=memory or 10**12, budget=budget,
                                      scheduler=scheduler, c0=C0, ap=PER_PREFILL,
                                      ad=PER_DECODE))
    workload.write_text(WORKLOAD.format(n=arrival.size, csv=csv))
    return pyserq.compile(str(program), workload=str(workload),
                          horizon=float(arrival.max()) * 10 + 1e12, seed=1)


def records(report, arrival):
    """Per-request TTFT, end-to-end latency and TPOT, the iteration and preemption counts."""
    n = arrival.size
    return {"ttft": _per_request(report.client["ttft"], n) - arrival,
            "latency": _per_request(report.observe("e2e"), n),
            "tpot": _per_request(report.client["tpot"], n),
            "iterations": report.stage("llm").iterations,
            "preemptions": report.pool("kv").preemptions}


def run_pyserq(folder, arrival, prompt, output, *, scheduler, budget, memory):
    compiled = compile_pyserq(folder, arrival, prompt, output, scheduler=scheduler,
                              budget=budget, memory=memory)
    return records(pyserq.run(compiled), arrival)
