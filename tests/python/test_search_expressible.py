"""search(expressible=FRAMEWORK) (issue 41): Python's search ranks only the layouts the
framework runs, as `bmpipe search --format FRAMEWORK` (and --expressible) does: the same
document, but for search.wall_s, a wall-clock time, and the executable's 'export'."""
import json

import pytest

import bmpipe
from conftest import MEDIUM, run_cli

CONFIG = str(MEDIUM)  # GPT-3's layer, 24 of them, on 64 A100s
# MindFormers resets vocab_emb_dp to False at pipeline_stage > 1 (its rule
# mindformers.vocab-emb-dp-pipeline, frameworks/mindformers/rules.cpp), so with
# vocab_parallel false it runs none of the tp > 1, pp > 1 layouts: of these 10, the 8 with
# pp 2 are the framework's to refuse, tp 2 pp 1 does not hold its weights and tp 8 pp 1
# (one planner-off evaluation) is ranked.
ARGS = ["--planner", "off", "--tp", "2,8", "--pp", "1,2", "--micro-batch-size", "1",
        "--memory-limit-GiB", "200", "--set", "training.vocab_parallel=false"]
KWARGS = {"planner": "off", "tp": [2, 8], "pp": [1, 2], "micro_batch_size": [1],
          "memory_limit_GiB": 200, "set": {"training.vocab_parallel": "false"}}


def text(document):
    """The document without its wall time, as JSON text (the key order included)."""
    assert isinstance(document["search"].pop("wall_s"), float)
    return json.dumps(document)


def cli_search(*args):
    rc, out, err = run_cli("search", CONFIG, *args, "--json", "--quiet")
    assert rc == 0, err
    return json.loads(out)


def test_expressible_is_the_executables_format():
    formatted = cli_search(*ARGS, "--format", "mindformers")
    assert formatted.pop("export")["format"] == "mindformers"
    got = bmpipe.search(CONFIG, **KWARGS, expressible="mindformers")
    assert text(got) == text(formatted)
    # The filter ran: 8 layouts refused by the framework, one ranked (hand-counted above).
    assert got["search"]["rejected_by"] == {"framework": 8, "static-memory": 1}
    assert [(l["tp"], l["pp"]) for l in got["layouts"] if l["fits"]] == [(8, 1)]
    # And the executable's --expressible (the same row of the request table) agrees.
    assert text(bmpipe.search(CONFIG, **KWARGS, expressible="mindformers")) == text(
        cli_search(*ARGS, "--expressible", "mindformers"))


def test_without_a_framework_the_refused_layouts_are_ranked():
    # The test above can fail: without expressible the pp 2 layouts fit and rank first.
    got = bmpipe.search(CONFIG, **KWARGS)
    assert "framework" not in got["search"]["rejected_by"]
    assert sum(l["fits"] for l in got["layouts"]) == 9
    assert text(got) == text(cli_search(*ARGS))


@pytest.mark.parametrize("framework", ["megatron", "mindformers"])
def test_each_framework_as_the_executable(framework):
    args = ["--tp", "4,8", "--pp", "4,8", "--micro-batch-size", "1", "--max-evals", "600"]
    expected = cli_search(*args, "--format", framework)
    expected.pop("export")
    got = bmpipe.search(CONFIG, tp=[4, 8], pp=[4, 8], micro_batch_size=[1], max_evals=600,
                        expressible=framework)
    assert text(got) == text(expected)


def test_a_schedule_the_framework_does_not_run_is_not_ranked():
    # Megatron-LM runs 1F1B and interleaved 1F1B only (frameworks/exporters.cpp,
    # megatron_not_run), as plan --expressible plans only those: zb-h1 is rejected.
    args = ["--planner", "off", "--tp", "8", "--pp", "4", "--micro-batch-size", "1",
            "--schedules", "1f1b,zb-h1"]
    got = bmpipe.search(CONFIG, planner="off", tp=[8], pp=[4], micro_batch_size=[1],
                        schedules=["1f1b", "zb-h1"], expressible="megatron")
    assert [(l["schedule"], l.get("filter")) for l in got["layouts"]] == [
        ("1f1b", None), ("zb-h1", "framework")]
    assert got["layouts"][1]["rejected"].startswith("Megatron-LM does not run zb-h1")
    assert text(got) == text(cli_search(*args, "--expressible", "megatron"))
    ranked = bmpipe.search(CONFIG, planner="off", tp=[8], pp=[4], micro_batch_size=[1],
                           schedules=["1f1b", "zb-h1"])
    assert {l["schedule"] for l in ranked["layouts"] if "filter" not in l} == {"1f1b", "zb-h1"}


def test_an_unknown_framework_names_the_keyword_and_the_closest_name():
    with pytest.raises(ValueError) as e:
        bmpipe.search(CONFIG, **KWARGS, expressible="mindformer")
    assert str(e.value) == ("expressible: unknown framework 'mindformer' (did you mean "
                            "'mindformers'?) (megatron, mindformers, torchtitan, "
                            "torchtitan-registry)")


def test_a_misspelt_keyword_is_told_the_name():
    with pytest.raises(TypeError, match="did you mean 'expressible'"):
        bmpipe.search(CONFIG, **KWARGS, expresible="mindformers")


def test_a_journal_of_format_resumes_with_expressible_and_not_without(tmp_path):
    # The framework is one of the journal's inputs: `bmpipe search --format megatron
    # --journal` is resumed by search(expressible='megatron', resume=...), and refused by a
    # search without it (whose layouts, and so its journal's indices, may differ).
    args = ["--tp", "4,8", "--pp", "4,8", "--micro-batch-size", "1,2"]
    kwargs = {"tp": [4, 8], "pp": [4, 8], "micro_batch_size": [1, 2]}
    journal = tmp_path / "journal"
    cut = cli_search(*args, "--format", "megatron", "--max-evals", "900", "--journal", journal)
    assert cut["search"]["stopped_by"] == "evaluation limit"
    lines = len(journal.read_text().splitlines())
    uninterrupted = bmpipe.search(CONFIG, **kwargs, expressible="megatron")
    resumed = bmpipe.search(CONFIG, **kwargs, expressible="megatron", resume=journal)
    assert text(resumed) == text(uninterrupted)
    assert len(journal.read_text().splitlines()) > lines
    with pytest.raises(ValueError, match="journal"):
        bmpipe.search(CONFIG, **kwargs, resume=journal)


def test_a_journal_from_before_the_framework_input_says_how_to_proceed(tmp_path):
    # Before the framework joined a journal's inputs (15a2f66) a search for one hashed its
    # inputs as a search for none still does: such a journal is refused under expressible=,
    # saying why and how to proceed, and left as it was (not resumed, not restarted over).
    kwargs = {"planner": "off", "tp": [8], "pp": [1, 2], "micro_batch_size": [1]}
    journal = tmp_path / "journal"
    bmpipe.search(CONFIG, **kwargs, journal=journal)
    written = journal.read_text()
    with pytest.raises(ValueError) as e:
        bmpipe.search(CONFIG, **kwargs, expressible="megatron", resume=journal)
    assert ":1: inputs: this journal's inputs are this search's without the framework " \
           "\"megatron\": it predates the framework" in str(e.value)
    assert "to search for megatron, remove it or name another file" in str(e.value)
    assert journal.read_text() == written
