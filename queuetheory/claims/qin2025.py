"""Qin et al., "Mooncake: Trading More Storage for Less Computation" (FAST 2025): what its
released traces say about prefix reuse.

Data: the conversation and synthetic traces shipped with the package
(:func:`queuetheory.data.mooncake_trace`, Apache-2.0); the tool&agent trace is not shipped.
Table 2 of the paper gives each trace's "cache ratio" without defining it; the checks here
compute the ratio under every definition the paper could mean
(:func:`queuetheory.workload.cache_ratio_definitions`: block- or token-weighted, all blocks
or full blocks only, with or without a warm-up) and say which match its rounded figure.
"""

from __future__ import annotations

import numpy as np

from ..data.mooncake import MOONCAKE_BLOCK, mooncake_table
from ..workload.prefix import cache_ratio_definitions
from .base import Outcome, claim

CONVENTION = ("an unbounded prefix cache over the trace's hash ids (512-token blocks, a hit "
              "= an id seen in an earlier request); no engine run")
#: Table 2's cache ratios, in % (rounded by the paper to whole percents)
TABLE_2 = {"conversation": 40, "synthetic": 66}


def _definitions(name: str):
    t = mooncake_table(name)
    d = cache_ratio_definitions(t["hash_ids"], t["input_length"], t["timestamp"],
                                block_size=MOONCAKE_BLOCK)
    d["label"] = [f"{r.weight}-weighted, {r.blocks} blocks"
                  + (f", after {100 * r.warmup:.0f} % warm-up" if r.warmup else "")
                  for r in d.itertuples()]
    return d


def _matching(name: str) -> set:
    d = _definitions(name)
    return set(d.loc[np.round(100 * d["ratio"]) == TABLE_2[name], "label"])


def _judge(name: str) -> Outcome:
    d = _definitions(name)
    paper = TABLE_2[name]
    match = d[np.round(100 * d["ratio"]) == paper]
    both = set.intersection(*(_matching(n) for n in TABLE_2))
    natural = d[(d.weight == "block") & (d.blocks == "full") & (d.warmup == 0)].iloc[0]
    data = {"paper_pct": paper, "definitions": d[["label", "ratio"]].to_dict("records"),
            "matching": match["label"].tolist(), "matching_both_traces": sorted(both),
            "block_full_pct": 100 * natural.ratio}
    lo, hi = 100 * d["ratio"].min(), 100 * d["ratio"].max()
    if natural_matches := round(100 * natural.ratio) == paper:
        verdict = "confirmed"
    else:
        verdict = "qualified"
    figure = (f"Table 2: {paper} %; reused full blocks over requested ones (no warm-up): "
              f"{100 * natural.ratio:.1f} %; all {len(d)} definitions: {lo:.1f}–{hi:.1f} %; "
              f"rounding to {paper} %: " + (", ".join(match["label"]) or "none"))
    note = ("" if natural_matches else
            f"The plain definition gives {100 * natural.ratio:.1f} %, not {paper} %; "
            + ("only " + ", ".join(match["label"]) + " rounds to it." if len(match) else
               "no definition rounds to it.") + " ")
    note += ("No one definition gives both traces' Table 2 figures (40 % and 66 %)."
             if not both else "Definitions giving both Table 2 figures: "
             + ", ".join(sorted(both)) + ".")
    return Outcome(verdict, figure, data, note, plot=_plot(name, d, paper))


def _plot(name, d, paper):
    def plot(ax):
        from ..plotting import finish, reference

        x = np.arange(len(d))
        ax.bar(x, 100 * d["ratio"], color="C0", width=0.8)
        ax.set_xticks(x, [f"{r.weight}\n{r.blocks}\n{100 * r.warmup:.0f} %"
                          for r in d.itertuples()], fontsize=7)
        reference(ax, paper, f"Table 2: {paper} %")
        finish(ax, title=f"Mooncake {name} trace: cache ratio by definition",
               xlabel="weight, blocks counted, warm-up left out",
               ylabel="prefix cache ratio (%)", logy=False)
    return plot


@claim("qin2025.cache_ratio_conversation",
       statement="The conversation trace (one hour of Kimi's service, 12,031 requests) has a "
                 "cache ratio of 40 % (Table 2; 'approximately 40 % prefix caching ratio "
                 "brought about by multi-turn conversations', §5.2.1). 'confirmed' if the "
                 "share of full prompt blocks found in an unbounded cache rounds to it, "
                 "'qualified' (with the figure) if only another definition does or none does.",
       expected="qualified",
       convention=CONVENTION,
       scope="the released trace, every definition of the ratio in cache_ratio_definitions")
def _conversation(quick: bool) -> Outcome:
    return _judge("conversation")


@claim("qin2025.cache_ratio_synthetic",
       statement="The synthetic trace (ShareGPT, L-Eval and LooGLE 1:1:1, 3,993 requests) has "
                 "a cache ratio of 66 % (Table 2). 'confirmed' if the share of full prompt "
                 "blocks found in an unbounded cache rounds to it, 'qualified' otherwise.",
       expected="confirmed",
       convention=CONVENTION,
       scope="the released trace, every definition of the ratio in cache_ratio_definitions")
def _synthetic(quick: bool) -> Outcome:
    return _judge("synthetic")


@claim("qin2025.prefix_hashes",
       statement="A hash id covers its block and every block before it (Appendix A): equal "
                 "ids mean equal prefixes, so an id is always preceded by the same id "
                 "sequence, in both released traces. A negative control (the ids of two "
                 "requests' second blocks swapped) must be rejected by the same test.",
       expected="confirmed",
       convention=CONVENTION,
       scope="every request of the conversation and synthetic traces")
def _prefix_hashes(quick: bool) -> Outcome:
    def consistent(hash_lists) -> tuple[bool, int]:
        parent: dict = {}
        for ids in hash_lists:
            for k, h in enumerate(ids):
                before = ids[k - 1] if k else None
                if parent.setdefault(h, before) != before:
                    return False, h
        return True, -1

    data = {}
    for name in ("conversation", "synthetic"):
        ok, bad = consistent(mooncake_table(name)["hash_ids"])
        data[name] = {"consistent": ok, "first_bad_id": bad}
    rows = [list(r) for r in mooncake_table("conversation")["hash_ids"][:2000]]
    i, j = next((a, b) for a in range(len(rows)) for b in range(a + 1, len(rows))
                if len(rows[a]) > 2 and len(rows[b]) > 2 and rows[a][1] != rows[b][1])
    rows[i][1], rows[j][1] = rows[j][1], rows[i][1]
    control, _ = consistent(rows)
    data["negative_control_rejected"] = not control
    ok = all(v["consistent"] for k, v in data.items() if isinstance(v, dict)) and not control

    def plot(ax):
        from ..plotting import bars

        lengths = {n: np.mean([len(h) for h in mooncake_table(n)["hash_ids"]])
                   for n in ("conversation", "synthetic")}
        bars(ax, lengths, title="Mooncake traces: prefix chains checked (all consistent)"
             if ok else "Mooncake traces: an inconsistent prefix chain",
             ylabel="mean blocks per request", logy=False)

    return Outcome("confirmed" if ok else "refuted",
                   f"prefix-consistent: conversation {data['conversation']['consistent']}, "
                   f"synthetic {data['synthetic']['consistent']}; swapped control rejected: "
                   f"{not control}", data, plot=plot)
