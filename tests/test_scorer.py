import json
import subprocess
import sys

import pytest

from conftest import SHARED_DATA, write_lines
from engine.cli import main
from engine.errors import InputError
from engine.tasks.smart_home.scorer import score_homebench_files
from engine.tasks.smart_home.scorer import parse_operations, score_rows


def test_operation_lists_split_outside_parentheses():
    assert parse_operations("''' a.b.set_color((1,2,3)),error_input,c.d.e(4),'''") == \
        ["a.b.set_color((1,2,3))", "error_input", "c.d.e(4)"]
    assert parse_operations("''' ding_room.light.set_brightness(50)'''") == ["ding_room.light.set_brightness(50)"]
    assert parse_operations("") == []


def test_partial_credit_by_hand():
    golds = ["'''a.l.on(),b.l.off(),'''", "'''error_input'''", "'''c.f.set(1),error_input,'''"]
    preds = ["'''b.l.off(),a.l.on(),'''",  # right, other order
             "'''error_input,error_input,'''",  # one extra op: fail; tp 1, pred 2, gold 1
             "'''c.f.set(2),error_input,'''"]  # one of two right: tp 1, pred 2, gold 2
    m = score_rows(golds, preds, ["VM", "IS", "MM"])
    assert m["VM"] == {"n": 1, "success": 1.0, "precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert m["IS"]["success"] == 0.0 and m["IS"]["precision"] == 0.5 and m["IS"]["recall"] == 1.0
    assert m["IS"]["f1"] == pytest.approx(2 / 3)
    # overall pools counts: tp = 2 + 1 + 1 = 4, predicted = 2 + 2 + 2 = 6, gold = 2 + 1 + 2 = 5
    o = m["overall"]
    assert o["n"] == 3 and o["success"] == pytest.approx(1 / 3)
    assert o["precision"] == pytest.approx(4 / 6) and o["recall"] == pytest.approx(4 / 5)
    assert o["f1"] == pytest.approx(2 * (4 / 6) * (4 / 5) / (4 / 6 + 4 / 5))
    assert m["IM"]["n"] == 0 and m["IM"]["success"] is None


def _as_pred(gold_path, tmp_path):
    rows = [json.loads(l) for l in gold_path.read_text().splitlines()]
    return write_lines(tmp_path / "pred.jsonl", [{"id": r["id"], "output": r["output"]} for r in rows])


def test_cli_scores_gold_as_prediction_one_everywhere(home_data, tmp_path, capsys):
    gold = home_data / "dev.jsonl"
    assert main(["score", "homebench", "--gold", str(gold), "--pred", str(_as_pred(gold, tmp_path)), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"VS", "IS", "VM", "IM", "MM", "overall"}
    for cat, m in result.items():
        assert m["n"] > 0, cat
        assert (m["success"], m["precision"], m["recall"], m["f1"]) == (1.0, 1.0, 1.0, 1.0), cat


def test_missing_prediction_counts_as_empty_and_unknown_id_is_an_error(home_data, tmp_path):
    gold = home_data / "dev.jsonl"
    rows = [json.loads(l) for l in gold.read_text().splitlines()]
    pred = write_lines(tmp_path / "p.jsonl", [{"id": r["id"], "output": r["output"]} for r in rows[1:]])
    assert score_homebench_files(gold, pred)["overall"]["success"] == pytest.approx((len(rows) - 1) / len(rows))
    bad = write_lines(tmp_path / "bad.jsonl", [{"id": "nope", "output": ""}])
    with pytest.raises(InputError, match=r"bad.jsonl:1 \[id\]"):
        score_homebench_files(gold, bad)


@pytest.mark.skipif(not (SHARED_DATA / "homebench").exists(), reason="../shared/data/homebench is not here")
def test_official_sample_gold_scores_one(tmp_path):
    gold = SHARED_DATA / "homebench" / "dev_sample_160.jsonl"
    out = subprocess.run([sys.executable, "-m", "engine.cli", "score", "homebench", "--gold", str(gold),
                          "--pred", str(_as_pred(gold, tmp_path)), "--json"], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    for cat in ("VS", "IS", "VM", "MM", "overall"):
        assert result[cat]["n"] > 0 and result[cat]["success"] == 1.0 and result[cat]["f1"] == 1.0
    assert result["IM"]["n"] == 0  # the sample has no IM rows
