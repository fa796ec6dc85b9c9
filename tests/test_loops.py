"""Loops in generated tokens (`sampling.stop_loops`): an answer is cut where its tokens end in one span
repeated n times, and only there; the harness field is checked."""
import pytest

from engine import ASSETS
from engine.errors import InputError
from engine.harness.spec import HarnessSpec
from engine.models.loops import MIN_LOOP, LoopWatch, loop_end

CALL = list(range(100, 114))  # one call of 14 tokens, as a model writing it again and again


def test_a_call_written_again_and_again_is_cut_after_its_nth_repeat():
    ids = [1, 2, 3] + CALL * 9 + [7]
    assert loop_end(ids, 4) == 3 + 4 * len(CALL)
    assert loop_end(ids, 3) == 3 + 3 * len(CALL)
    assert loop_end(ids, 0) is None and loop_end(CALL * 3, 4) is None  # off, or three repeats of four


def test_distinct_calls_and_short_repeats_are_no_loop():
    distinct = [t for i in range(10) for t in [100, 101, 200 + i, 102]]  # calls that differ in one token
    assert loop_end(distinct, 4) is None
    # a short span repeated: a loop only once its repeats cover MIN_LOOP tokens
    assert loop_end([5, 6] * 15, 4) is None and loop_end([5, 6] * 16, 4) == MIN_LOOP == 32
    assert loop_end([0] * (MIN_LOOP - 1), 4) is None


def test_the_watch_reads_tokens_one_at_a_time_as_a_backend_streams_them():
    watch = LoopWatch(4)
    seen = [watch.push(t) for t in [9] + CALL * 5]
    assert seen.index(True) == 4 * len(CALL) and sum(seen) > 1  # it stays looped once it is


def test_a_harness_names_a_bad_repeat_count(tmp_path):
    base = HarnessSpec.load(ASSETS / "harnesses" / "smart_home_json.yaml").to_dict()
    assert HarnessSpec.from_dict({**base, "sampling": {**base["sampling"], "stop_loops": 4}}).sampling.stop_loops == 4
    for bad in (1, -2, 40):
        with pytest.raises(InputError, match="sampling.stop_loops"):
            HarnessSpec.from_dict({**base, "sampling": {**base["sampling"], "stop_loops": bad}})
