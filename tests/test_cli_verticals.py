"""The benchmark commands of the two verticals, run as a user runs them."""
import json

import pytest

from conftest import REPO, SHARED_DATA, coevo, write_lines

WHO_AND_WHEN = SHARED_DATA / "who_and_when"
SPIDER_AC = SHARED_DATA / "rbac_text2sql" / "department_store_144.jsonl"
FIXTURES = REPO / "tests" / "fixtures"


def gold_predictions(root):
    rows = []
    for path in sorted(root.rglob("*.json")):
        d = json.loads(path.read_text())
        if str(d.get("mistake_step", "")).isdigit():
            rows.append({"id": str(path.relative_to(root).with_suffix("")), "agent": d["mistake_agent"],
                         "step": int(d["mistake_step"])})
    return rows


@pytest.mark.parametrize("root", [WHO_AND_WHEN, FIXTURES / "who_and_when" / "Algorithm-Generated"],
                         ids=["shared", "fixtures"])
def test_score_whowhen_with_the_gold_as_predictions_is_perfect(root, tmp_path):
    if not root.exists():
        pytest.skip(f"{root} is absent")
    pred = write_lines(tmp_path / "pred.jsonl", gold_predictions(root))
    for rule in ("exact", "substring"):
        out = json.loads(coevo("score", "whowhen", "--gold", str(root), "--pred", str(pred), "--rule", rule,
                               "--json").stdout)
        assert out["rule"] == rule
        assert out["overall"]["agent_accuracy"] == out["overall"]["step_accuracy"] == 1.0
        assert out["overall"]["n"] == len(gold_predictions(root)) and not out["unknown_ids"]


def test_score_whowhen_names_a_bad_prediction_line(tmp_path):
    root = FIXTURES / "who_and_when" / "Algorithm-Generated"
    pred = write_lines(tmp_path / "pred.jsonl", [{"id": "21", "agent": "X", "step": 1}, {"id": "47", "agent": "X"}])
    out = coevo("score", "whowhen", "--gold", str(root), "--pred", str(pred), check=False)
    assert out.returncode == 2 and f"{pred}:2 [step]" in out.stderr


@pytest.mark.parametrize("gold", [SPIDER_AC, FIXTURES / "rbac_sql" / "department_store_8.jsonl"],
                         ids=["shared", "fixtures"])
def test_sql_guard_agrees_with_every_label(gold):
    if not gold.exists():
        pytest.skip(f"{gold} is absent")
    report = json.loads(coevo("sql", "guard", "--gold", str(gold), "--json").stdout)
    assert report["agree"] == report["rows"] > 0 and report["disagreements"] == []


def test_score_rbac_sql_gold_answers_and_refusals(tmp_path):
    gold = FIXTURES / "rbac_sql" / "department_store_8.jsonl"
    rows = [json.loads(line) for line in gold.read_text().splitlines()]
    perfect = [{"line": i, "refuse": True} if r["ground_truth_label"].startswith("ERROR") else
               {"line": i, "sql": r["query"]} for i, r in enumerate(rows)]
    out = json.loads(coevo("score", "rbac-sql", "--gold", str(gold), "--pred",
                           str(write_lines(tmp_path / "p.jsonl", perfect)), "--json").stdout)
    assert out["decision_accuracy"] == 1.0 and out["false_permit_rate"] == 0.0
    # answering every row with its gold SQL: every DENY row becomes a wrong decision
    answer_all = [{"line": i, "sql": r["query"]} for i, r in enumerate(rows)]
    out = json.loads(coevo("score", "rbac-sql", "--gold", str(gold), "--pred",
                           str(write_lines(tmp_path / "q.jsonl", answer_all)), "--json").stdout)
    denies = sum(r["ground_truth_label"].startswith("ERROR") for r in rows)
    assert out["decision_accuracy"] == pytest.approx((len(rows) - denies) / len(rows))
