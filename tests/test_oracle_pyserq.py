"""An external oracle: pyserq, an independent serving simulator written in Rust, on the same
fixed traces must give every request the same TTFT, end-to-end latency and TPOT, and the same
number of iterations, to the last bit.

Both run the real engines' conventions: the iteration that finishes a prompt emits the first
output token, and a preempted request keeps its tokens and prefills prompt plus generated
tokens again once they all fit in memory (vLLM's recompute preemption). pyserq's workloads draw
their own arrivals, so every request arrives at time 0, waits its trace arrival time on an
infinite-server delay stage, and only then reaches the engine; latencies are measured from
there, and pyserq's client TTFT (from time 0) less the arrival gives the TTFT. Time unit: µs.
"""

import numpy as np
import pytest

import queuetheory as qt

pyserq = pytest.importorskip("pyserq")

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


def run_pyserq(tmp_path, arrival, prompt, output, *, scheduler, budget, memory):
    """Per-request TTFT, end-to-end latency and TPOT, and the iteration count."""
    csv = tmp_path / "trace.csv"
    rows = [f"{i},0,{p},{o},{a!r}" for i, (a, p, o) in
            enumerate(zip(arrival.tolist(), prompt.tolist(), output.tolist(), strict=True))]
    csv.write_text("session,turn,new,out,think\n" + "\n".join(rows) + "\n")
    program, workload = tmp_path / "program.sq", tmp_path / "workload.sq"
    program.write_text(PROGRAM.format(kv_cap=memory or 10**12, budget=budget,
                                      scheduler=scheduler, c0=C0, ap=PER_PREFILL,
                                      ad=PER_DECODE))
    workload.write_text(WORKLOAD.format(n=arrival.size, csv=csv))
    compiled = pyserq.compile(str(program), workload=str(workload),
                              horizon=float(arrival.max()) * 10 + 1e12, seed=1)
    report = pyserq.run(compiled)
    n = arrival.size
    return {"ttft": _per_request(report.client["ttft"], n) - arrival,
            "latency": _per_request(report.observe("e2e"), n),
            "tpot": _per_request(report.client["tpot"], n),
            "iterations": report.stage("llm").iterations,
            "preemptions": report.pool("kv").preemptions}


def run_queuetheory(arrival, prompt, output, policy, memory):
    trace = qt.Workload.from_arrays(arrival, prompt, output)
    res = qt.simulate(trace, policy, TIME, memory=memory, first_token="prefill")
    req = res.requests
    return {"ttft": req["ttft"].to_numpy(), "latency": req["latency"].to_numpy(),
            "tpot": req["tbt_mean"].to_numpy(), "iterations": res.engine.iteration,
            "preemptions": int(req["restarts"].sum())}


def _anchor_trace(n=40, seed=1):
    """512-token prompts, 256 output tokens, Poisson arrivals at 4 requests/s (in µs)."""
    rng = np.random.default_rng(seed)
    return (np.cumsum(rng.exponential(0.25e6, n)), np.full(n, 512), np.full(n, 256))


def _sharegpt_trace(n=40, seed=2):
    prompt, output = qt.data.sharegpt_lengths()
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, prompt.size, n)
    p, o = prompt[pick].astype(np.int64), output[pick].astype(np.int64)
    return np.cumsum(rng.exponential(0.1e6, n)), p, o


CASES = {
    # vLLM without chunked prefill needs a budget of at least the longest prefill (prompt
    # plus the tokens a preemption put back), as vLLM itself requires max_num_batched_tokens
    # >= max_model_len: 2048 here.
    "sarathi": (SARATHI, lambda: qt.policies.Sarathi(512), 512),
    "vllm": (VLLM, lambda: qt.policies.VLLMVanilla(2048), 2048),
}


@pytest.mark.parametrize("memory", [None, 6000], ids=["no-kv-limit", "kv-6000"])
@pytest.mark.parametrize("scheduler", list(CASES))
@pytest.mark.parametrize("make_trace", [_anchor_trace, _sharegpt_trace],
                         ids=["anchor", "sharegpt"])
def test_same_requests_as_pyserq(tmp_path, scheduler, memory, make_trace):
    program, make_policy, budget = CASES[scheduler]
    arrival, prompt, output = make_trace()
    if memory is not None:
        memory = max(memory, int((prompt + output).max()))
    theirs = run_pyserq(tmp_path, arrival, prompt, output, scheduler=program, budget=budget,
                        memory=memory)
    ours = run_queuetheory(arrival, prompt, output, make_policy(), memory)
    for key in ("ttft", "latency", "tpot"):
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    assert ours["iterations"] == theirs["iterations"]
    assert not np.isnan(ours["latency"]).any()
    if memory is not None and make_trace is _anchor_trace:
        # the limit binds: requests are preempted and recomputed, as often in both
        assert ours["preemptions"] == theirs["preemptions"] > 0
