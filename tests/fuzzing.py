"""What the fuzz tests share: the documented outcomes, the settings and the strategies.

CI runs a fixed, bounded sample (``derandomize``, a fixed example count per test, so the
whole fuzz stays well under a minute on two cores); ``QT_FUZZ_EXAMPLES=2000`` explores
more, at random (``QT_FUZZ_EXAMPLES=2000 python -m pytest tests/test_fuzz*.py``).
"""

from __future__ import annotations

import os
import re
import time
import warnings

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from queuetheory.errors import InfeasibleBatchError, QueueTheoryError

_DEEP = int(os.environ.get("QT_FUZZ_EXAMPLES", "0"))


def fuzz(examples: int = 40):
    """Hypothesis settings: ``examples`` derandomized examples in CI, ``QT_FUZZ_EXAMPLES``
    random ones when set."""
    return settings(max_examples=_DEEP or examples, deadline=None, derandomize=not _DEEP,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


FUZZ = fuzz()

#: The longest a single fuzzed call may take (seconds): a call that would run longer must
#: refuse its input with an estimate, honour a time limit, or be sized by its arguments.
CALL_LIMIT = float(os.environ.get("QT_FUZZ_CALL_LIMIT", "20"))

# the values a user may type: ordinary, boundary and absurd
numbers = st.one_of(
    st.integers(-2, 40),
    st.floats(-1.0, 50.0, allow_nan=False),
    st.sampled_from([0, 0.0, 1e-300, 1e17, 2**63, float("nan"), float("inf"), -float("inf")]),
)
lengths = st.one_of(st.integers(1, 30), st.sampled_from([0, -1, 2**40, 2**63]),
                    st.floats(0.3, 30.0, allow_nan=False))
rates = st.one_of(st.floats(0.0, 2.0, allow_nan=False), st.sampled_from([-1.0, float("nan"), 1e9]))
#: what a user may pass where an integer count is meant (seeds, folds, probes, blocks)
counts = st.one_of(st.integers(-2, 6), st.sampled_from([1.5, 2.0, float("nan"), float("inf"),
                                                        "3", None, True, 2**63]))
#: fractions (levels, tolerances, tails, attainments)
fractions = st.one_of(st.floats(0.0, 1.0), st.sampled_from([-0.5, 1.5, 1e-300, float("nan"),
                                                            float("inf"), "0.5"]))


def _names(message: str, names) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message)
               for n in names)


def outcome(call, names):
    """Run ``call``; return its value, or ``None`` after a documented exception. The call
    must end within ``CALL_LIMIT`` seconds."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = call()
        event("returned")
        return value
    except InfeasibleBatchError as err:
        raise AssertionError(f"a policy built an infeasible batch: {err}") from err
    except QueueTheoryError as err:
        event(f"refused: {type(err).__name__}")
        return None
    except (ValueError, TypeError) as err:
        assert _names(str(err), names), f"{type(err).__name__} naming no parameter: {err}"
        event(f"refused: {type(err).__name__}")
        return None
    finally:
        took = time.perf_counter() - started
        assert took < CALL_LIMIT, f"the call ran {took:.1f} s, past {CALL_LIMIT} s"


def cli_outcome(main, argv) -> int | None:
    """Run a command in-process: it returns 0 or 1, or exits with one line
    ``queuetheory ...: error: ...`` (a bad flag or value), nothing else."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = main(argv)
        assert code in (0, 1), f"{argv}: returned {code!r}"
        event(f"returned {code}")
        return code
    except SystemExit as exit_:
        assert isinstance(exit_.code, str) and exit_.code.startswith("queuetheory"), \
            f"{argv}: exit {exit_.code!r}"
        assert "\n" not in exit_.code.strip(), f"{argv}: a multi-line error {exit_.code!r}"
        event("refused")
        return None
    finally:
        took = time.perf_counter() - started
        assert took < CALL_LIMIT, f"{argv} ran {took:.1f} s, past {CALL_LIMIT} s"


NAN_WHEN = {
    "mean_latency": "completed", "p50_latency": "completed", "p99_latency": "completed",
    "mean_ttft": "first", "p99_ttft": "first", "mean_tbt": "gaps", "p99_tbt": "gaps",
}


def check_metrics(res):
    """A run's metrics are finite and non-negative, NaN only over an empty set."""
    import math

    m = res.metrics
    req = res.requests
    empty = {"completed": m["completed"] == 0, "first": req["ttft"].notna().sum() == 0,
             "gaps": req["tbt_mean"].notna().sum() == 0}
    for key, value in m.items():
        v = float(value)
        if math.isnan(v):
            assert key in NAN_WHEN and empty[NAN_WHEN[key]], f"{key} is NaN: {m}"
        else:
            assert math.isfinite(v) and v >= 0, f"{key} = {value}: {m}"
    assert m["completed"] <= m["arrived"]


def one_bad(valid: dict, bad: dict):
    """Keyword arguments drawn from ``valid`` with at most one of them from ``bad`` instead:
    about half of the examples are valid throughout (they reach the computation), the rest
    break one rule each (they reach its check)."""
    choices = [None] * len(bad) + list(bad)
    return st.sampled_from(choices).flatmap(lambda broken: st.fixed_dictionaries(
        {k: (bad[k] if k == broken else v) for k, v in valid.items()}))
