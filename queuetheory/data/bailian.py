"""The Qwen-Bailian usage traces (Alibaba Cloud Bailian), read into sessions.

Released with Wang et al., "KVCache Cache in the Wild: Characterizing and Optimizing KVCache
Cache at a Large Cloud Provider", USENIX ATC 2025, in the public repository
``alibaba-edu/qwen-bailian-usagetraces-anon`` (Apache License 2.0). The files are stored with
Git LFS and are not shipped here: get one (``qwen_thinking_blksz_16.jsonl``,
``qwen_coder_blksz_16.jsonl``, ``qwen_traceA_blksz_16.jsonl``, ``qwen_traceB_blksz_16.jsonl``)
as that repository's README says, and give its path to :func:`bailian_sessions`.

One JSON object per line, as the upstream README gives it:

=================== =====================================================================
field               meaning
=================== =====================================================================
``chat_id``         the request's id (an integer, unique in the file)
``parent_chat_id``  the previous request of the same conversation, ``-1`` for a first turn
``timestamp``       arrival, in seconds from the start of the file (a float)
``input_length``    prompt tokens
``output_length``   output tokens
``type``            request type (``text``, ``search``, ``image``, ``file``, or the newer
                    files' own labels)
``turn``            the turn's number in its conversation, 1 for a first turn
``hash_ids``        one id per 16-token block of the prompt (a partial last block included)
=================== =====================================================================

How the fields map onto :class:`~queuetheory.workload.SessionPlan` (the model
:class:`~queuetheory.workload.Sessions` draws):

* **turns**: a request is the ``next`` turn of its parent; the conversation is the
  ``session``; ``turn`` is the field minus one (0 for a first turn, as ``Sessions`` counts).
* **think times**: the recorded gap between the parent's arrival and the turn's. It holds
  the recorded answer's serving time as well as the user's think time, so a closed-loop run
  (:func:`~queuetheory.networks.simulate_fleet`) sends each turn at least as late after its
  parent as the recording did, plus the simulated answer's time: an upper estimate of the
  think time (``dataclasses.replace(plan, think=...)`` sets another).
* **sessions cut by the file's window**: a turn whose parent is not in the file (the file
  is a two-hour sample) starts a session at its recorded arrival.
* **branches**: a parent with several children (an answer regenerated, a message edited):
  the earliest child is its ``next`` turn, each later one starts a session at its recorded
  arrival, in the same conversation (``session``).
* **blocks**: the README defines the ids as a salted hash of each 16-token block, so an id
  alone need not fix the prefix. A KV block is reusable only after the same prefix, so the
  loader keys block ``k`` by the whole chain ``(id_0, …, id_k)``, numbered densely in order
  of first appearance: equal keys mean equal prompts up to the end of that block, as
  :attr:`~queuetheory.workload.Trace.blocks` requires (where the ids are already prefix
  hashes, the chain changes nothing). Only full blocks are kept (``input_length // 16``
  ids): the last, partial one may hold padding whose hash changes (the upstream FAQ).
* ``type`` becomes the request class, numbered in sorted order of the labels
  (``SessionPlan.classes``).

The records' ``plan.trace`` is the recording itself, every turn at its recorded arrival
(in arrival order), for an open-loop replay (``qt.simulate(plan.trace, ...)``).
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path

import numpy as np

__all__ = ["bailian_sessions", "BAILIAN_BLOCK", "BAILIAN_FIELDS"]

#: tokens per hash id of the Qwen-Bailian traces
BAILIAN_BLOCK = 16
#: the fields of a record, each required
BAILIAN_FIELDS = ("chat_id", "parent_chat_id", "timestamp", "input_length", "output_length",
                  "type", "turn", "hash_ids")
_TIME_UNITS = {"s": 1.0, "ms": 1e-3}


def _bad(line: int, field: str, value, rule: str) -> ValueError:
    return ValueError(f"line {line}: field {field!r}={value!r}: {rule}")


def _integer(line, field, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(line, field, value, f"must be an integer >= {low}")
    return value


def _record(line: int, obj) -> tuple:
    """One validated record: ``(chat_id, parent, timestamp, input, output, type, turn,
    hash_ids)``."""
    if not isinstance(obj, dict):
        raise ValueError(f"line {line}: a record must be a JSON object, not {obj!r:.60}")
    for field in BAILIAN_FIELDS:
        if field not in obj:
            raise ValueError(f"line {line}: field {field!r} is missing (a record needs "
                             f"{', '.join(BAILIAN_FIELDS)})")
    chat = _integer(line, "chat_id", obj["chat_id"], 0)
    parent = _integer(line, "parent_chat_id", obj["parent_chat_id"], -1)
    if parent == chat:
        raise _bad(line, "parent_chat_id", parent, "a request cannot be its own parent")
    t = obj["timestamp"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise _bad(line, "timestamp", t, "must be a finite number of seconds >= 0")
    prompt = _integer(line, "input_length", obj["input_length"], 0)
    output = _integer(line, "output_length", obj["output_length"], 0)
    kind = obj["type"]
    if not isinstance(kind, str):
        raise _bad(line, "type", kind, "must be a string")
    turn = _integer(line, "turn", obj["turn"], 1)
    if parent == -1 and turn != 1:
        raise _bad(line, "turn", turn, "a first turn (parent_chat_id -1) must be turn 1")
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            and i >= 0 for i in ids):
        raise _bad(line, "hash_ids", ids if len(repr(ids)) < 80 else f"{repr(ids)[:70]}…",
                   "must be a list of integers >= 0")
    most = -(-prompt // BAILIAN_BLOCK)
    if len(ids) > most:
        raise _bad(line, "hash_ids", f"{len(ids)} ids", f"more than the {most} blocks of "
                   f"{BAILIAN_BLOCK} tokens an input_length of {prompt} holds")
    return chat, parent, float(t), prompt, output, kind, turn, ids


def _lines(source):
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"source={str(path)!r}: no such file")
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            yield from enumerate(f, start=1)
        return
    raise ValueError(f"source={source!r}: expected the path of a .jsonl or .jsonl.gz file")


def bailian_sessions(source, *, time_unit: str = "s", zero_tokens: str = "drop"):
    """A Qwen-Bailian usage trace as sessions (module docstring: the fields and their map).

    Parameters
    ----------
    source : str or path-like
        Path of the trace (``.jsonl``, or ``.jsonl.gz``), in the upstream format.
    time_unit : {"s", "ms"}, default "s"
        The unit of the arrivals and think times.
    zero_tokens : {"drop", "clip"}, default "drop"
        ``"drop"`` (a dropped turn's children start sessions) or ``"clip"`` (to 1 token) the
        requests with 0 input or output tokens, which the engine cannot run; either way a
        warning gives the count.

    Returns
    -------
    SessionPlan
        One row per request in arrival order: ``trace`` (the recorded arrivals, prompt and
        output lengths, ``type`` as the class, prefix blocks of 16 tokens keyed by their
        chain), ``session``, ``turn``, ``think``, ``next`` and ``classes`` (the ``type``
        labels, by class index).

    Raises
    ------
    ValueError
        A line that is not JSON or not an object; a missing field, or a value of the wrong
        type or range, named with its line and field; more ``hash_ids`` than the input's
        blocks; a ``chat_id`` seen twice; a turn that arrives before its parent or whose
        ``turn`` is not its parent's plus one; an unknown ``time_unit`` or
        ``zero_tokens``; a ``source`` that is not the path of a file; a file with no request
        left.

    Warns
    -----
    UserWarning
        When requests with 0 input or output tokens are dropped or clipped.
    """
    from ..workload import Trace
    from ..workload.sessions import SessionPlan

    if time_unit not in _TIME_UNITS:
        raise ValueError(f"time_unit={time_unit!r}: must be one of {tuple(_TIME_UNITS)}")
    if zero_tokens not in ("drop", "clip"):
        raise ValueError(f"zero_tokens={zero_tokens!r}: must be 'drop' or 'clip'")
    records, line_of = [], {}
    for line, text in _lines(source):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"line {line}: not JSON ({e.msg})") from None
        rec = _record(line, obj)
        if rec[0] in line_of:
            raise _bad(line, "chat_id", rec[0], f"already the id of line {line_of[rec[0]]}")
        line_of[rec[0]] = line
        records.append(rec)
    by_id = {r[0]: r for r in records}
    for chat, parent, t, *_, turn, _ids in records:
        if parent in by_id:
            if by_id[parent][2] > t:
                raise _bad(line_of[chat], "timestamp", t, f"earlier than its parent's "
                           f"(chat_id {parent}, line {line_of[parent]}: {by_id[parent][2]})")
            if by_id[parent][6] + 1 != turn:
                raise _bad(line_of[chat], "turn", turn, f"its parent (chat_id {parent}, line "
                           f"{line_of[parent]}) is turn {by_id[parent][6]}; must be one more")
    zero = [r for r in records if r[3] == 0 or r[4] == 0]
    if zero:
        warnings.warn(f"bailian_sessions: {len(zero)} request(s) with 0 input or output "
                      f"tokens {'dropped' if zero_tokens == 'drop' else 'counted as 1 token'}"
                      f" (zero_tokens={zero_tokens!r})", stacklevel=2)
        if zero_tokens == "drop":
            records = [r for r in records if r[3] > 0 and r[4] > 0]
    if not records:
        raise ValueError(f"source: no request left to replay from {len(line_of)} record(s)")
    order = sorted(range(len(records)), key=lambda i: (records[i][2], i))
    records = [records[i] for i in order]
    return _plan(records, _TIME_UNITS[time_unit], Trace, SessionPlan)


def _plan(records, unit, Trace, SessionPlan):
    """The :class:`SessionPlan` of validated records in arrival order."""
    n = len(records)
    row_of = {r[0]: i for i, r in enumerate(records)}
    t = np.array([r[2] for r in records]) / unit
    prompt = np.maximum(np.array([r[3] for r in records], dtype=np.int64), 1)
    output = np.maximum(np.array([r[4] for r in records], dtype=np.int64), 1)
    labels = sorted({r[5] for r in records})
    cls = np.array([labels.index(r[5]) for r in records], dtype=np.int64)
    turn = np.array([r[6] - 1 for r in records], dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    think = np.zeros(n)
    session = np.empty(n, dtype=np.int64)
    opened = 0
    keys: dict[tuple, int] = {}
    blocks = np.empty(n, dtype=object)
    for i, (_chat, parent, *_rest) in enumerate(records):
        p = row_of.get(parent, -1)
        if p >= 0:                              # the parent's conversation
            session[i] = session[p]
            if nxt[p] < 0:                      # the earliest child is the next turn
                nxt[p] = i
                think[i] = t[i] - t[p]
        else:                                   # a first turn, or its parent not in the file
            session[i], opened = opened, opened + 1
        ids, prev = records[i][7][: int(prompt[i]) // BAILIAN_BLOCK], -1
        chain = np.empty(len(ids), dtype=np.int64)
        for k, h in enumerate(ids):
            prev = keys.setdefault((prev, h), len(keys))
            chain[k] = prev
        blocks[i] = chain
    zeros = np.zeros(n, np.int64)
    trace = Trace(t - t[0], prompt, output, cls, output.copy(), output.copy(), zeros,
                  blocks=blocks, block_size=BAILIAN_BLOCK)
    return SessionPlan(trace, session, turn, think, nxt, tuple(labels))
