"""TIES merging through mergekit over the lowest common ancestor, as the `merge` inheritance policy does."""
import pytest

from conftest import copy_default
from engine.archive import Archive
from engine.evaluate import task_dir
from engine.evolve.inheritance import POLICIES, InheritContext
from engine.harness.spec import HarnessSpec
from engine.models import load_backend
from engine.tasks import get_task

pytestmark = pytest.mark.slow


def test_merge_policy_ties_merges_the_two_best_over_their_common_ancestor(small_default, tmp_path):
    with Archive(copy_default(small_default, tmp_path)) as archive:
        spec = HarnessSpec.from_dict(archive.harness("smart_home-json")["spec"])
        task = get_task("smart_home", task_dir(archive, "smart_home"))
        ctx = InheritContext(archive, spec, task, task.load("dev")[:6], latest="c2", start="c2", round=1,
                             stage1=3)
        proposal = POLICIES.get("merge")(ctx)
        merged = archive.checkpoint(proposal.choice)
        assert merged["kind"] == "merge"
        roles = sorted((p["parent"], p["role"]) for p in merged["parents"])
        base = archive.checkpoint("tiny-base")["id"]
        assert roles == sorted([("c2", "model"), ("c3", "model"), (base, "base")])
        recipe = merged["recipe"]["mergekit"]
        assert recipe["merge_method"] == "ties" and recipe["base_model"] == archive.checkpoint(base)["path"]
        assert proposal.choice in proposal.evidence["probe"]
        backend = load_backend("transformers", merged["path"])  # a complete, loadable model directory
        (text, tokens), = backend.generate([backend.chat_prompt([{"role": "user", "content": "Turn on the light."}])],
                                           max_new_tokens=8)
        assert tokens > 0


def test_a_merge_made_outside_the_rounds_is_no_seed_column(small_default, tmp_path):
    from engine.checkpoints import merge, register
    from engine.evaluate import evaluate_seed_matrix
    with Archive(copy_default(small_default, tmp_path)) as archive:
        base = archive.checkpoint("tiny-base")["id"]
        merged = register(archive, merge(archive, ["c2", "c3"], base, "merge-roots"))
        evaluate_seed_matrix(archive, "smart_home", "dev", limit=2)
        columns = {e["checkpoint"] for e in archive.evaluations() if e["split"] == "dev"}
        assert columns == {"c2", "c3"} and merged not in columns
