"""Append-only column storage for per-iteration records, and a token-level TBT histogram."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["ColumnLog", "TBTHistogram"]


class ColumnLog:
    """Per-iteration records in numpy columns (doubling on demand).

    Writes are held and stored together, column by column, before any read (or once many
    are held): ``append`` holds a row as a tuple (one list append on the engine's hot path),
    ``extend`` its columns as they are, at its place among the rows.

    Parameters
    ----------
    columns : dict
        ``{name: dtype}`` of the columns, in the order of a row.
    capacity : int, default 4096
        Rows allocated at the start.
    """

    FLUSH = 1 << 14

    def __init__(self, columns: dict, capacity: int = 4096):
        self._dtypes = dict(columns)
        self._cols = {k: np.empty(capacity, dtype=d) for k, d in self._dtypes.items()}
        self._names = tuple(self._dtypes)
        self._stored = 0
        self._rows: list[tuple] = []
        self._blocks: list[tuple] = []     # (rows held before it, k, columns) of each extend
        self._in_blocks = 0
        self._lazy = None                  # the source of a first write kept unexpanded

    @property
    def n(self) -> int:
        """The number of rows written, held ones included."""
        return self._stored + len(self._rows) + self._in_blocks

    def append(self, *values):
        """Append one row.

        Parameters
        ----------
        *values
            One value per column, in the order of ``columns``.
        """
        rows = self._rows
        rows.append(values)
        if len(rows) >= self.FLUSH:
            self._flush()

    def extend(self, k: int, *columns):
        """Append ``k`` rows at once: each value an array of length ``k`` or a scalar.

        Parameters
        ----------
        k : int
            The number of rows.
        *columns
            One array of length ``k`` or scalar per column, in the order of ``columns``.
        """
        if not self.n and k > len(self._cols[self._names[0]]):
            # a first bulk write: keep its arrays as they are
            self._cols = {name: (c if type(c) is np.ndarray and c.dtype == self._dtypes[name]
                                 and c.shape == (k,) else np.full(k, c, self._dtypes[name]))
                          for name, c in zip(self._names, columns, strict=True)}
            self._stored = k
            return
        self._blocks.append((len(self._rows), k, columns))
        self._in_blocks += k
        if self._in_blocks >= self.FLUSH:
            self._flush()

    def extend_lazy(self, k: int, source):
        """Append ``k`` rows whose columns ``source.column(name)`` gives, each read from it
        only when first asked for (a bulk run's log, mostly read for a few columns). Kept
        so only as the log's first write; any later write expands them all.

        Parameters
        ----------
        k : int
            The number of rows.
        source : object
            Gives each column by ``column(name)`` (and, read without expanding,
            ``column(name, at)``, ``path_at(name, edges)`` and ``ends_at(at)``).
        """
        if self.n:
            self.extend(k, *(source.column(name) for name in self._names))
            return
        self._lazy, self._cols, self._stored = source, {}, k

    def _expand(self):
        """Every column of a lazily kept first write, read from its source."""
        if self._lazy is not None:
            for name in self._names:
                self._read_lazy(name)
            self._lazy = None

    def _read_lazy(self, name: str):
        """Column ``name`` of the lazily kept first write, read from its source once."""
        if self._lazy is not None and name not in self._cols:
            self._cols[name] = np.asarray(self._lazy.column(name), dtype=self._dtypes[name])

    def _lazy_only(self) -> bool:
        """Whether the log is a lazily kept first write and nothing after it."""
        return self._lazy is not None and not self._rows and not self._blocks

    def _flush(self):
        rows, blocks = self._rows, self._blocks
        if not rows and not blocks:
            return
        self._expand()
        n, need = self._stored, self.n
        self._rows, self._blocks, self._in_blocks = [], [], 0
        cap = len(self._cols[self._names[0]])
        if need > cap:
            cap = max(2 * cap, need)
            for name, a in self._cols.items():
                wider = np.empty(cap, dtype=a.dtype)
                wider[:n] = a[:n]
                self._cols[name] = wider
        at, ahead = [], n                # a block lands after the rows and blocks before it
        for before, k, _ in blocks:
            at.append(ahead + before)
            ahead += k
        if rows:
            shift = np.zeros(len(rows) + 1, dtype=np.int64)
            for before, k, _ in blocks:
                shift[before] += k
            dest = n + np.arange(len(rows)) + shift[:-1].cumsum()    # so does a row
            for name, c in zip(self._names, zip(*rows, strict=True), strict=True):
                self._cols[name][dest] = np.array(c, dtype=self._dtypes[name])
        for start, (_, k, columns) in zip(at, blocks, strict=True):
            for name, c in zip(self._names, columns, strict=True):
                self._cols[name][start: start + k] = c
        self._stored = need

    def column(self, name: str, at: np.ndarray | None = None) -> np.ndarray:
        """Column ``name``, or its values at the rows ``at`` only (read from a lazily kept
        source without expanding the column, where the source can).

        Parameters
        ----------
        name : str
            The column.
        at : numpy.ndarray, optional
            Row indices; ``None``: every row.

        Returns
        -------
        numpy.ndarray
            The values (the stored column itself, not a copy, when ``at`` is ``None``).
        """
        if at is not None and self._lazy_only() and name not in self._cols:
            return np.asarray(self._lazy.column(name, at), dtype=self._dtypes[name])
        self._read_lazy(name)
        self._flush()
        column = self._cols[name][: self._stored]
        return column if at is None else column[at]

    def path_at(self, name: str, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The step path of column ``name`` against the iterations' ends (start plus
        duration) at the sorted times ``edges``: its values and integrals
        (:func:`~queuetheory.metrics.step_path_at`), from a lazily kept source a row at a
        time, without expanding it, where the source can.

        Parameters
        ----------
        name : str
            The column.
        edges : numpy.ndarray
            Sorted times.

        Returns
        -------
        values : numpy.ndarray
            The column's value at each edge.
        integrals : numpy.ndarray
            Its integral up to each edge.
        """
        if self._lazy_only():
            return self._lazy.path_at(name, edges)
        from ..metrics import step_path_at

        return step_path_at(self.ends(), self.column(name).astype(float), edges)

    def ends(self, at: np.ndarray | None = None) -> np.ndarray:
        """Each iteration's end (start plus duration), or those of the iterations ``at``.

        Parameters
        ----------
        at : numpy.ndarray, optional
            Row indices; ``None``: every row.

        Returns
        -------
        numpy.ndarray
            The end times.
        """
        if at is not None and self._lazy_only():
            return self._lazy.ends_at(at)
        return self.column("start", at) + self.column("duration", at)

    def frame(self) -> pd.DataFrame:
        """The log as a table.

        Returns
        -------
        pandas.DataFrame
            One row per iteration, one column per name.
        """
        self._expand()
        self._flush()
        return pd.DataFrame({k: self._cols[k][: self._stored] for k in self._names})


class TBTHistogram:
    """Token-level time-between-tokens counts per class on log-spaced bins.

    Bins are ``10**(k/200)`` for ``k`` in ``[-2400, 2400)``: percentiles are exact to within
    1.2 % relative, for gaps from ``1e-12`` to ``1e12`` time units. Gaps are held as they
    come and binned in bulk; the gap that most requests of a batch share (each also emitted
    in the previous batch) is held once, with its count.

    Parameters
    ----------
    n_classes : int
        The request classes kept apart (at least one row of counts).
    """

    PER_DECADE = 200
    LOW = -12

    FLUSH = 1 << 16

    def __init__(self, n_classes: int):
        self.width = 24 * self.PER_DECADE
        self.single = n_classes <= 1
        self._counts = np.zeros((max(1, n_classes), self.width), dtype=np.int64)
        self._held: list[tuple] = []       # (classes, gaps, weights) arrays
        self._size = 0
        self._gaps: list[float] = []       # single class: one shared gap per entry ...
        self._weights: list[int] = []      # ... and how many requests had it
        self._shared: list[float] = []     # several classes: one shared gap per entry ...
        self._sharers: list[np.ndarray] = []   # ... and the classes of the requests with it

    @property
    def counts(self) -> np.ndarray:
        """Counts per class and bin (what ``add`` holds is binned here)."""
        if self._gaps:
            gaps = np.array(self._gaps)
            self._held.append((np.zeros(gaps.size, np.int64), gaps,
                               np.array(self._weights, dtype=float)))
            self._gaps, self._weights = [], []
        if self._shared:
            sizes = [c.size for c in self._sharers]
            bins = np.repeat(self._bins(np.array(self._shared)), sizes)
            flat = np.concatenate(self._sharers) * self.width + bins
            self._counts += np.bincount(flat, minlength=self._counts.size
                                        ).reshape(self._counts.shape)
            self._shared, self._sharers = [], []
            self._size = 0
        if self._held:
            cls, gaps, weights = (np.concatenate(x) for x in zip(*self._held, strict=True))
            self._held, self._size = [], 0
            flat = cls * self.width + self._bins(gaps)
            binned = np.bincount(flat, weights=weights, minlength=self._counts.size)
            self._counts += np.rint(binned).astype(np.int64).reshape(self._counts.shape)
        return self._counts

    def _hold(self, cls, gaps, weights):
        self._held.append((cls, gaps, weights))
        self._size += gaps.size
        if self._size >= self.FLUSH:
            self.counts  # noqa: B018  (bins what is held)

    def add(self, cls: np.ndarray, gaps: np.ndarray):
        """One gap per request, of classes ``cls``.

        Parameters
        ----------
        cls : numpy.ndarray
            Each request's class.
        gaps : numpy.ndarray
            Its gap, in time units.
        """
        self._hold(cls, gaps, np.ones(gaps.size))

    def add_shared(self, gap: float, count: int, cls=None):
        """``gap`` once for each of ``count`` requests, of classes ``cls`` (an array, read
        only when the histogram has several classes).

        Parameters
        ----------
        gap : float
            The gap, in time units.
        count : int
            The requests that had it.
        cls : numpy.ndarray, optional
            Their classes (needed with several classes).
        """
        if self.single:
            self._gaps.append(gap)
            self._weights.append(count)
            if len(self._gaps) >= self.FLUSH:
                self.counts  # noqa: B018  (bins what is held)
            return
        self._shared.append(gap)
        self._sharers.append(cls)
        self._size += cls.size
        if self._size >= self.FLUSH:
            self.counts  # noqa: B018  (bins what is held)

    def add_counted(self, gaps: np.ndarray, counts: np.ndarray, cls: int = 0):
        """Gap ``gaps[j]`` once for each of ``counts[j]`` requests of class ``cls``.

        Parameters
        ----------
        gaps : numpy.ndarray
            The gaps, in time units.
        counts : numpy.ndarray
            How many requests had each.
        cls : int, default 0
            Their class.
        """
        self._hold(np.full(gaps.size, cls, dtype=np.int64), gaps, counts.astype(float))

    def add_intervals(self, gaps: np.ndarray, lo: np.ndarray, hi: np.ndarray, cls: np.ndarray):
        """Gap ``gaps[g]`` once for each request ``i`` with ``lo[i] <= g < hi[i]``, of class
        ``cls[i]``: the gaps of iterations that requests decode through one after another.

        Parameters
        ----------
        gaps : numpy.ndarray
            The gaps of consecutive iterations, in time units.
        lo : numpy.ndarray
            Per request, the first gap it closes.
        hi : numpy.ndarray
            Per request, one past the last gap it closes.
        cls : numpy.ndarray
            Per request, its class.
        """
        bins = None
        present = np.flatnonzero(np.bincount(cls))     # the classes here (no sort)
        for c in present.tolist():
            mine = slice(None) if present.size == 1 else cls == c
            edges = np.bincount(lo[mine], minlength=gaps.size + 1)
            edges -= np.bincount(hi[mine], minlength=gaps.size + 1)
            counts = edges.cumsum()[: gaps.size]
            if gaps.size < self.FLUSH:
                self.add_counted(gaps, counts, c)
                continue
            if bins is None:                 # many gaps: binned now, each once
                bins = self._bins(gaps)
            self._counts[c] += np.bincount(bins, weights=counts, minlength=self.width
                                           ).round().astype(np.int64)

    def _bins(self, gaps):
        k = np.floor((np.log10(np.maximum(gaps, 1e-300)) - self.LOW) * self.PER_DECADE)
        return np.clip(k, 0, self.width - 1).astype(np.int64)

    def quantile(self, q: float, cls: int | None = None) -> float:
        """The ``q``-quantile of the gaps: the upper edge of the bin that holds it.

        Parameters
        ----------
        q : float
            The level, in ``[0, 1]``.
        cls : int, optional
            One class's gaps; ``None``: every class's.

        Returns
        -------
        float
            The quantile, in time units (within 1.2 % relative), or NaN with no gap.
        """
        c = self.counts.sum(axis=0) if cls is None else self.counts[cls]
        total = c.sum()
        if total == 0:
            return float("nan")
        k = int(np.searchsorted(np.cumsum(c), q * total))
        return float(10 ** (self.LOW + (k + 1) / self.PER_DECADE))  # upper edge of the bin
