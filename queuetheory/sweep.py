"""Parameter sweeps on any ``concurrent.futures`` executor, with a resumable checkpoint.

``sweep(fn, grid, seeds=...)`` calls ``fn(**point, seed=seed)`` for every point of the grid and
every seed, on a process pool by default or on any :class:`concurrent.futures.Executor` —
``dask.distributed.Client().get_executor()`` runs it on a cluster (the ``[distributed]``
extra). With ``checkpoint="file.parquet"`` (or ``.csv``) each finished run is written at once
(atomically: a killed sweep leaves the last complete file), and a new call skips the runs the
file already holds, so a killed sweep loses only the runs in flight.
"""

from __future__ import annotations

import io
import itertools
import math
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd

__all__ = ["sweep", "grid_points"]


def grid_points(grid) -> list[dict]:
    """A dict of lists (the Cartesian product, in order) or a list of dicts, as points.

    Parameters
    ----------
    grid : dict of lists or list of dicts
        ``{"rate": [1, 2], "budget": [256]}`` (every combination, the last name varying
        fastest) or the points themselves.

    Returns
    -------
    list of dict
        One dict of parameter values per point.

    Raises
    ------
    ValueError
        If a value of the dict is a string or not iterable, or an item of the list is not a
        dict.
    """
    if isinstance(grid, Mapping):
        names = list(grid)
        for name in names:
            if isinstance(grid[name], str) or not hasattr(grid[name], "__iter__"):
                raise ValueError(f"grid[{name!r}]={grid[name]!r}: must be a list of values")
        return [dict(zip(names, values, strict=True))
                for values in itertools.product(*(list(grid[n]) for n in names))]
    points = [dict(p) for p in grid]
    if not all(isinstance(p, dict) for p in points):
        raise ValueError("grid: expected a dict of lists or a list of dicts")
    return points


def _canon(v):
    """A key that survives a round trip through CSV or parquet (1 == 1.0, 'a' == 'a')."""
    if isinstance(v, bool):
        return ("b", v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ("s", str(v))
    return ("s", "nan") if math.isnan(f) else ("f", f)


def _read(path: Path) -> pd.DataFrame | None:
    """The checkpoint as one snapshot: read whole in one open, since pyarrow opening the
    path twice could pair the footer of one version with the pages of the next while a
    running sweep replaces it."""
    if not path.exists():
        return None
    data = io.BytesIO(path.read_bytes())
    return pd.read_parquet(data) if path.suffix == ".parquet" else pd.read_csv(data)


def _write(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if path.suffix == ".parquet":
        frame.to_parquet(tmp, index=False)
    else:
        frame.to_csv(tmp, index=False)
    os.replace(tmp, path)          # atomic: a kill never leaves a half-written checkpoint


def _run(fn, point, seed):
    out = fn(**point, seed=seed)
    return dict(out) if isinstance(out, Mapping) else {"value": out}


def sweep(fn: Callable, grid, *, seeds=(0,), executor: Executor | None = None,
          checkpoint=None, progress: bool = True) -> pd.DataFrame:
    """Run ``fn(**point, seed=s)`` over ``grid`` × ``seeds``; one DataFrame row per run.

    Parameters
    ----------
    fn : callable
        A function of the grid's parameters and ``seed`` returning a dict of results (or one
        value, stored as ``value``); picklable for a process pool (defined at module level).
    grid : dict of lists or list of dicts
        The points (a dict of lists is its Cartesian product; see :func:`grid_points`).
    seeds : iterable of int or int, default (0,)
        The seeds (an int ``k`` means ``range(k)``).
    executor : concurrent.futures.Executor, optional
        Any executor; default a process pool on every core.
    checkpoint : str or pathlib.Path, optional
        A path ending in ``.parquet`` or ``.csv``; finished runs are written as they finish
        and skipped when the sweep is run again.
    progress : bool, default True
        Show a tqdm bar.

    Returns
    -------
    pandas.DataFrame
        The rows in grid order, then seed order: parameters, ``seed``, results.

    Raises
    ------
    ValueError
        If ``fn`` is not callable, ``seeds`` is empty, the grid names a parameter ``seed``,
        a grid is malformed (see :func:`grid_points`), or ``checkpoint`` ends in neither
        ``.parquet`` nor ``.csv``.
    """
    if not callable(fn):
        raise ValueError(f"fn={fn!r}: must be callable")
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seeds:
        raise ValueError("seeds: need at least one seed")
    points = grid_points(grid)
    names = list(dict.fromkeys(k for p in points for k in p))
    if "seed" in names:
        raise ValueError("grid: 'seed' is reserved, pass seeds=... instead")
    runs = [(p, s) for p in points for s in seeds]
    path = None
    done: dict[tuple, dict] = {}
    if checkpoint is not None:
        path = Path(checkpoint)
        if path.suffix not in (".parquet", ".csv"):
            raise ValueError(f"checkpoint={checkpoint!r}: must end in .parquet or .csv")
        old = _read(path)
        if old is not None:
            for row in old.to_dict("records"):
                key = tuple(_canon(row.get(n)) for n in names) + (_canon(row["seed"]),)
                done[key] = row

    def key_of(point, seed):
        return tuple(_canon(point.get(n)) for n in names) + (_canon(seed),)

    todo = [(i, p, s) for i, (p, s) in enumerate(runs) if key_of(p, s) not in done]
    rows: dict[int, dict] = {i: done[key_of(p, s)] for i, (p, s) in enumerate(runs)
                             if key_of(p, s) in done}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), initial=len(rows), desc="sweep", unit="run")
    own = executor is None and todo
    pool = ProcessPoolExecutor() if own else executor
    try:
        if todo:
            futures = {pool.submit(_run, fn, p, s): (i, p, s) for i, p, s in todo}
            for fut in as_completed(futures):
                i, p, s = futures[fut]
                rows[i] = {**p, "seed": s, **fut.result()}
                if path is not None:
                    _write(pd.DataFrame([rows[j] for j in sorted(rows)]), path)
                if bar is not None:
                    bar.update(1)
    finally:
        if own:
            pool.shutdown(cancel_futures=True)
        if bar is not None:
            bar.close()
    return pd.DataFrame([rows[i] for i in range(len(runs))]).reset_index(drop=True)
