"""search(journal=...) is `bmpipe search --journal`: the same file, read back so that an
interrupted search resumes with the uninterrupted result; and set= is the command line's
--set KEY=VALUE for simulate, plan and search (issue 38)."""
import json
import warnings

import pytest

import bmpipe
from conftest import EXAMPLES, MEDIUM, TINY, run_cli

CONFIG = str(MEDIUM)  # GPT-3's layer, 24 of them, on 64 A100s: 28 layouts
KWARGS = {"tp": [4, 8], "pp": [4, 8], "micro_batch_size": [1, 2]}
ARGS = ["--tp", "4,8", "--pp", "4,8", "--micro-batch-size", "1,2"]


def without_wall_time(document):
    assert isinstance(document["search"].pop("wall_s"), float)
    return document


def records(path):
    """The journal's header line and its layout lines."""
    lines = path.read_text().splitlines(keepends=True)
    return lines[0], lines[1:]


def same_journal(a, b):
    """The same header and the same layout lines (threads may finish them in any order)."""
    header_a, lines_a = a if isinstance(a, tuple) else records(a)
    header_b, lines_b = b if isinstance(b, tuple) else records(b)
    return header_a == header_b and sorted(lines_a) == sorted(lines_b)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The search without a journal, and a journal of the same search written whole."""
    journal = tmp_path_factory.mktemp("whole") / "journal"
    document = without_wall_time(bmpipe.search(CONFIG, **KWARGS, journal=journal))
    assert without_wall_time(bmpipe.search(CONFIG, **KWARGS)) == document
    return document, journal.read_text()


def test_the_journal_has_a_header_and_one_line_per_layout(uninterrupted):
    document, text = uninterrupted
    lines = text.splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "bmpipe search journal 1"
    assert header["layouts"] == document["search"]["layouts"] == 28
    assert sorted(json.loads(line)["layout"] for line in lines[1:]) == list(range(28))


@pytest.mark.parametrize("kept", [0, 1, 13, 27])
def test_a_journal_cut_to_a_prefix_resumes_to_the_uninterrupted_result(
        tmp_path, uninterrupted, kept):
    document, text = uninterrupted
    journal = tmp_path / "journal"
    lines = text.splitlines(keepends=True)
    journal.write_text("".join(lines[:1 + kept]))
    assert without_wall_time(bmpipe.search(CONFIG, **KWARGS, journal=journal)) == document
    # The layouts it had are kept, the others appended: the whole journal again.
    header, got = records(journal)
    assert header == lines[0] and got[:kept] == lines[1:1 + kept]
    assert sorted(got) == sorted(lines[1:])


def test_the_layouts_in_the_journal_are_read_back_not_planned_again(tmp_path, uninterrupted):
    document, text = uninterrupted
    lines = text.splitlines(keepends=True)
    # One record's evaluations changed: a resumed search that read it back counts them.
    first = json.loads(lines[1])
    first["result"]["evaluations"] += 1000
    journal = tmp_path / "journal"
    journal.write_text(lines[0] + json.dumps(first, separators=(",", ":")) + "\n" +
                       "".join(lines[2:]))
    got = without_wall_time(bmpipe.search(CONFIG, **KWARGS, journal=journal))
    assert got["search"]["evaluations"] == document["search"]["evaluations"] + 1000


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path, uninterrupted):
    document, text = uninterrupted
    journal = tmp_path / "journal"
    last = text.rindex("\n", 0, len(text) - 1) + 1
    journal.write_text(text[:last + (len(text) - last) // 2])
    with pytest.warns(UserWarning, match=r"note: --journal .*: line 29 was torn"):
        got = bmpipe.search(CONFIG, **KWARGS, journal=journal)
    assert without_wall_time(got) == document
    assert journal.read_text() == text


def test_a_journal_of_other_inputs_is_refused(tmp_path, uninterrupted):
    _, text = uninterrupted
    journal = tmp_path / "journal"
    journal.write_text(text)
    for other in [{"seed": 2}, {"planner": "off"}, {"margin_GiB": 0.1},
                  {"set": {"training.sequence_parallel": "false"}}]:
        with pytest.raises(ValueError, match="journal: .*written for other inputs"):
            bmpipe.search(CONFIG, **KWARGS, **other, journal=journal)
    with pytest.raises(ValueError, match="journal: .*not a bmpipe search journal"):
        (tmp_path / "junk").write_text("hello\n")
        bmpipe.search(CONFIG, **KWARGS, journal=tmp_path / "junk")
    assert journal.read_text() == text
    # What does not change a result may differ; a loaded Config is its file.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bmpipe.search(bmpipe.load(CONFIG), **KWARGS, threads=1, journal=str(journal))
    assert journal.read_text() == text


def test_either_front_end_resumes_the_others_journal(tmp_path, uninterrupted):
    document, text = uninterrupted
    lines = text.splitlines(keepends=True)
    # The executable writes the same journal: the same header and lines.
    rc, out, err = run_cli("search", CONFIG, *ARGS, "--quiet", "--json", "--journal",
                           tmp_path / "cli")
    assert rc == 0, err
    whole = (lines[0], lines[1:])
    assert same_journal(tmp_path / "cli", whole)
    cli = json.loads(out)
    assert without_wall_time(cli) == document
    # Python resumes a journal the executable began, and the executable one Python began.
    (tmp_path / "cli").write_text("".join(lines[:5]))
    assert without_wall_time(bmpipe.search(CONFIG, **KWARGS, journal=tmp_path / "cli")) == cli
    (tmp_path / "py").write_text("".join(lines[:5]))
    rc, out, err = run_cli("search", CONFIG, *ARGS, "--quiet", "--json", "--journal",
                           tmp_path / "py")
    assert rc == 0, err
    assert without_wall_time(json.loads(out)) == document
    assert same_journal(tmp_path / "py", whole)


def test_a_journal_with_set_is_the_commands_with_set(tmp_path):
    args = ["--planner", "off", "--tp", "8", "--pp", "4,8", "--micro-batch-size", "1"]
    kwargs = {"planner": "off", "tp": [8], "pp": [4, 8], "micro_batch_size": [1]}
    rc, out, err = run_cli("search", CONFIG, *args, "--set", "training.sequence_parallel=true",
                           "--quiet", "--json", "--journal", tmp_path / "cli")
    assert rc == 0, err
    got = bmpipe.search(CONFIG, **kwargs, set=["training.sequence_parallel=true"],
                        journal=tmp_path / "py")
    assert without_wall_time(got) == without_wall_time(json.loads(out))
    assert same_journal(tmp_path / "py", tmp_path / "cli")


# ---- set= ---------------------------------------------------------------------------------

GPT3 = str(EXAMPLES / "gpt3_175b_a100.yaml")  # tp 8: sequence parallelism changes its time


def cli_json(*args):
    rc, out, err = run_cli(*args, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_set_changes_the_job_as_the_file_would():
    # tiny.yaml: 1F1B, p = 4, F + B = 3 ms per stage: (m + p - 1) x 3 ms.
    assert bmpipe.simulate(str(TINY))["iteration_time_ms"] == 33.0
    assert bmpipe.simulate(str(TINY), set={"training.microbatches": 16})[
        "iteration_time_ms"] == 57.0
    assert bmpipe.simulate(str(TINY), set=["training.microbatches=16"])[
        "iteration_time_ms"] == 57.0


def test_set_is_the_commands_set():
    expected = cli_json("simulate", GPT3, "--set", "training.sequence_parallel=true")
    assert bmpipe.simulate(GPT3, set={"training.sequence_parallel": True}) == expected
    assert bmpipe.simulate(GPT3, set=["training.sequence_parallel=true"]) == expected
    assert bmpipe.simulate(bmpipe.load(GPT3, set={"training.sequence_parallel": "true"})) == \
        expected
    assert bmpipe.simulate(GPT3) != expected
    plan = cli_json("plan", TINY, "--quiet", "--threads", "1", "--max-evals", "20", "--set",
                    "training.microbatches=12")
    got = bmpipe.plan(str(TINY), threads=1, max_evals=20, set={"training.microbatches": 12})
    assert without_wall_time(got) == without_wall_time(plan)


def test_bad_sets_are_refused():
    with pytest.raises(ValueError, match="set: expected KEY=VALUE"):
        bmpipe.simulate(GPT3, set=["training.sequence_parallel"])
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.simulate(GPT3, set={"training.sequence_parallel": "maybe"})
    assert e.value.key == "sequence_parallel"
    with pytest.raises(ValueError, match="set: applies while the config is read"):
        bmpipe.simulate(bmpipe.load(GPT3), set={"training.sequence_parallel": True})
    with pytest.raises(TypeError):
        bmpipe.simulate(GPT3, set="training.sequence_parallel=true")
