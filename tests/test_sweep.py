"""qt.sweep: grids, seeds, executors (process pool, threads, Dask) and a killed sweep resumed."""

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

import queuetheory as qt

ROOT = Path(__file__).resolve().parents[1]


def affine(a, b, seed):
    return {"y": a * b + seed, "pid": os.getpid()}


def test_grid_product_in_order_with_seeds():
    df = qt.sweep(affine, {"a": [1, 2, 3], "b": [10, 20]}, seeds=[0, 5],
                  executor=ThreadPoolExecutor(3), progress=False)
    assert list(df.columns[:3]) == ["a", "b", "seed"]
    assert len(df) == 12
    assert df[["a", "b", "seed"]].values.tolist()[:4] == [[1, 10, 0], [1, 10, 5],
                                                         [1, 20, 0], [1, 20, 5]]
    assert (df["y"] == df["a"] * df["b"] + df["seed"]).all()


def test_default_process_pool_and_list_of_points():
    df = qt.sweep(affine, [{"a": 2, "b": 3}, {"a": 4, "b": 5}], seeds=2, progress=False)
    assert df["y"].tolist() == [6, 7, 20, 21]
    assert os.getpid() not in set(df["pid"])           # ran in worker processes


def test_scalar_results_become_a_value_column():
    df = qt.sweep(lambda x, seed: x + seed, {"x": [1.5]}, seeds=1,
                  executor=ThreadPoolExecutor(1), progress=False)
    assert df["value"].tolist() == [1.5]


@pytest.mark.parametrize("kwargs, name", [
    ({"grid": {"a": 3}}, "grid"), ({"grid": {"seed": [1]}}, "seed"),
    ({"grid": {"a": [1]}, "checkpoint": "x.json"}, "checkpoint"),
    ({"grid": {"a": [1]}, "seeds": []}, "seeds")])
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        qt.sweep(lambda a, seed: a, progress=False, **kwargs)


SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from concurrent.futures import ThreadPoolExecutor
import queuetheory as qt

def slow(a, b, seed):
    with open({log!r}, "a") as f:
        f.write(f"{{a}},{{b}},{{seed}}\\n")
    time.sleep(0.15)
    return {{"y": a * 100 + b * 10 + seed}}

if __name__ == "__main__":
    qt.sweep(slow, {{"a": [0, 1, 2], "b": [0, 1]}}, seeds=2,
             executor=ThreadPoolExecutor(1), checkpoint={ckpt!r}, progress=False)
"""


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_killed_sweep_resumes_without_redoing_finished_runs(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    ckpt, log = tmp_path / f"ck{suffix}", tmp_path / "calls.log"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT.format(root=str(ROOT), log=str(log),
                                                    ckpt=str(ckpt))))
    proc = subprocess.Popen([sys.executable, str(script)])
    deadline = time.time() + 120
    while time.time() < deadline:
        if ckpt.exists() and len(qt.sweep.__globals__["_read"](ckpt)) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = qt.sweep.__globals__["_read"](ckpt)
    assert 4 <= len(saved) < 12                        # killed part-way
    calls_before = len(log.read_text().splitlines())

    spec = importlib.util.spec_from_file_location(f"killed_sweep_{suffix[1:]}", script)
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)                       # the same function, here
    df = qt.sweep(run.slow, {"a": [0, 1, 2], "b": [0, 1]}, seeds=2,
                  executor=ThreadPoolExecutor(2), checkpoint=ckpt, progress=False)
    calls_after = len(log.read_text().splitlines())
    assert calls_after - calls_before == 12 - len(saved)   # only the missing runs ran
    assert (df["y"] == df["a"] * 100 + df["b"] * 10 + df["seed"]).all()
    assert len(df) == 12 and len(qt.sweep.__globals__["_read"](ckpt)) == 12
    again = qt.sweep(run.slow, {"a": [0, 1, 2], "b": [0, 1]}, seeds=2, checkpoint=ckpt,
                     executor=ThreadPoolExecutor(1), progress=False)
    assert len(log.read_text().splitlines()) == calls_after    # nothing left to run
    pd.testing.assert_frame_equal(again, df, check_dtype=False)


def test_dask_local_cluster_executor():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            df = qt.sweep(affine, {"a": [1, 2], "b": [3]}, seeds=2,
                          executor=client.get_executor(), progress=False)
    assert df["y"].tolist() == [3, 4, 6, 7]
