"""The Qwen-Bailian usage-trace loader (queuetheory.data.bailian_sessions) on a small file
written here in the upstream format: sessions rebuilt from parent links, prefix blocks keyed
by their chain, branches and cut sessions, a closed-loop fleet run, and malformed records
refused naming their line and field."""

import gzip
import json

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.workload import prefix_hit_ratio

ROWS = [
    # chat 0 opens a conversation; chat 2 is its next turn, chat 3 a regenerated answer
    {"chat_id": 0, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 40,
     "output_length": 10, "type": "text", "turn": 1, "hash_ids": [0, 1, 2]},
    # block 0 equal to chat 0's; block 1 equal content after another prefix
    {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 36,
     "output_length": 5, "type": "search", "turn": 1, "hash_ids": [0, 3, 4]},
    {"chat_id": 2, "parent_chat_id": 0, "timestamp": 3.25, "input_length": 70,
     "output_length": 8, "type": "text", "turn": 2, "hash_ids": [0, 1, 2, 5, 6]},
    {"chat_id": 3, "parent_chat_id": 0, "timestamp": 4.0, "input_length": 33,
     "output_length": 6, "type": "text", "turn": 2, "hash_ids": [0, 1, 7]},
    # its parent (99) lies before the file's window
    {"chat_id": 4, "parent_chat_id": 99, "timestamp": 5.0, "input_length": 48,
     "output_length": 4, "type": "file", "turn": 3, "hash_ids": [3, 1, 8]},
    {"chat_id": 5, "parent_chat_id": 2, "timestamp": 9.0, "input_length": 100,
     "output_length": 3, "type": "text", "turn": 3, "hash_ids": [0, 1, 2, 5, 9, 10, 11]},
]


def write(path, rows, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def test_sessions_are_rebuilt_from_the_parent_links(tmp_path):
    # shuffled lines: the loader orders by arrival
    plan = qt.data.bailian_sessions(write(tmp_path / "t.jsonl", ROWS[::-1]))
    tr = plan.trace
    np.testing.assert_array_equal(tr.arrival, [0.0, 0.5, 3.25, 4.0, 5.0, 9.0])
    np.testing.assert_array_equal(tr.prompt, [40, 36, 70, 33, 48, 100])
    np.testing.assert_array_equal(tr.output, [10, 5, 8, 6, 4, 3])
    assert plan.classes == ("file", "search", "text")
    np.testing.assert_array_equal(tr.cls, [2, 1, 2, 2, 0, 2])
    np.testing.assert_array_equal(plan.next, [2, -1, 5, -1, -1, -1])
    np.testing.assert_array_equal(plan.first, [0, 1, 3, 4])      # a branch, a cut session
    np.testing.assert_array_equal(plan.session, [0, 1, 0, 0, 2, 0])
    np.testing.assert_array_equal(plan.turn, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(plan.think, [0, 0, 3.25, 0, 0, 9.0 - 3.25])
    ms = qt.data.bailian_sessions(write(tmp_path / "t.jsonl.gz", ROWS, gz=True),
                                  time_unit="ms")
    np.testing.assert_array_equal(ms.trace.arrival, 1000 * tr.arrival)


def test_blocks_are_full_16_token_blocks_keyed_by_their_chain(tmp_path):
    tr = qt.data.bailian_sessions(write(tmp_path / "t.jsonl", ROWS)).trace
    assert tr.block_size == qt.data.BAILIAN_BLOCK == 16
    sizes = [len(b) for b in tr.blocks]
    assert sizes == [p // 16 for p in tr.prompt]                  # partial blocks dropped
    b = tr.blocks
    assert b[1][0] == b[0][0] and b[1][1] != b[0][1]     # same first block, then apart
    assert b[4][1] != b[0][1]                             # id 1 after another prefix: new key
    assert list(b[2][:2]) == list(b[0][:2]) and list(b[3][:2]) == list(b[0][:2])
    assert list(b[5][:4]) == list(b[2][:4])
    # requested 2+2+4+2+3+6 = 19 full blocks; distinct chains: (0), (0,1), (0,3), (0,1,2),
    # (0,1,2,5), (3), (3,1), (3,1,8), and chat 5's (…,9) and (…,9,10): 10
    reuse = prefix_hit_ratio(tr, details=True)
    assert (reuse.requested, reuse.distinct) == (19, 10)


def test_a_recorded_plan_runs_as_closed_loop_sessions(tmp_path):
    plan = qt.data.bailian_sessions(write(tmp_path / "t.jsonl", ROWS))
    tm = qt.AffineTokenTime(0.01, 5e-5, 4e-5)
    pol = qt.policies.VLLMV1(8, 64, num_gpu_blocks=200)
    fleet = qt.networks.simulate_fleet(plan, pol, tm, engines=2, router="cache_aware")
    r = fleet.requests
    assert len(r) == 6 and r["finish"].notna().all()
    # each next turn is sent its think time after its parent's answer, not at its recording
    for parent, child in ((0, 2), (2, 5)):
        assert r["arrival"][child] == pytest.approx(r["finish"][parent] + plan.think[child])
    for start in plan.first:
        assert r["arrival"][start] == plan.trace.arrival[start]
    assert r["cached"].sum() > 0                          # later turns find their history
    open_loop = qt.simulate(plan.trace, pol, tm)          # the recording itself
    assert open_loop.metrics["completed"] == 6


def _with(i, **change):
    rows = [dict(r) for r in ROWS]
    rows[i].update(change)
    for k, v in change.items():
        if v is KeyError:
            del rows[i][k]
    return rows


@pytest.mark.parametrize(("rows", "match"), [
    (_with(2, turn=KeyError), r"line 3: field 'turn' is missing"),
    (_with(0, chat_id="0"), r"line 1: field 'chat_id'='0': must be an integer >= 0"),
    (_with(1, parent_chat_id=-2), r"line 2: field 'parent_chat_id'=-2"),
    (_with(1, parent_chat_id=1), r"line 2: field 'parent_chat_id'=1: a request cannot be"),
    (_with(0, timestamp=float("nan")), r"line 1: field 'timestamp'=nan"),
    (_with(0, timestamp="0.0"), r"line 1: field 'timestamp'='0.0'"),
    (_with(3, input_length=-1), r"line 4: field 'input_length'=-1"),
    (_with(3, output_length=2.5), r"line 4: field 'output_length'=2.5"),
    (_with(1, type=3), r"line 2: field 'type'=3: must be a string"),
    (_with(0, turn=2), r"line 1: field 'turn'=2: a first turn"),
    (_with(5, turn=4), r"line 6: field 'turn'=4: its parent \(chat_id 2, line 3\) is turn 2"),
    (_with(0, hash_ids=[0, "1"]), r"line 1: field 'hash_ids'=\[0, '1'\]: must be a list"),
    (_with(0, hash_ids=[0, 1, 2, 3]), r"line 1: field 'hash_ids'='4 ids': more than the 3"),
    (_with(4, chat_id=2), r"line 5: field 'chat_id'=2: already the id of line 3"),
    (_with(5, timestamp=3.0),
     r"line 6: field 'timestamp'=3.0: earlier than its parent's \(chat_id 2, line 3: 3.25\)"),
])
def test_malformed_records_are_refused_naming_line_and_field(tmp_path, rows, match):
    with pytest.raises(ValueError, match=match):
        qt.data.bailian_sessions(write(tmp_path / "t.jsonl", rows))


def test_bad_files_and_options_are_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match="line 2: not JSON"):
        qt.data.bailian_sessions(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="line 1: a record must be a JSON object"):
        qt.data.bailian_sessions(path)
    with pytest.raises(ValueError, match="no such file"):
        qt.data.bailian_sessions(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="time_unit='h'"):
        qt.data.bailian_sessions(write(path, ROWS), time_unit="h")
    with pytest.raises(ValueError, match="zero_tokens='keep'"):
        qt.data.bailian_sessions(write(path, ROWS), zero_tokens="keep")


def test_zero_token_requests_are_dropped_or_clipped_with_a_warning(tmp_path):
    rows = _with(2, output_length=0)
    with pytest.warns(UserWarning, match="1 request"):
        plan = qt.data.bailian_sessions(write(tmp_path / "t.jsonl", rows))
    assert len(plan.trace) == 5
    # chat 5's parent (chat 2) was dropped: it starts its own session at its arrival
    assert 4 in plan.first and plan.turn[4] == 2
    with pytest.warns(UserWarning, match="counted as 1 token"):
        clip = qt.data.bailian_sessions(write(tmp_path / "t.jsonl", rows), zero_tokens="clip")
    assert clip.trace.output[2] == 1 and clip.next[2] == 5
