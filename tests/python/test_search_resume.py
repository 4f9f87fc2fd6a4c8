"""search(resume=...) (issue 38 item 3): a search a budget stopped, in Python or in the
executable, is finished from its journal, and the report is the uninterrupted search's."""
import json

import pytest

import bmpipe
from conftest import MEDIUM, run_cli

CONFIG = str(MEDIUM)  # GPT-3's layer, 24 of them, on 64 A100s: 28 layouts
KWARGS = {"tp": [4, 8], "pp": [4, 8], "micro_batch_size": [1, 2]}
ARGS = ["--tp", "4,8", "--pp", "4,8", "--micro-batch-size", "1,2"]
BUDGET = 900  # evaluations: a few layouts of the 28 (a short plan is 64 to 96)


def without_wall_time(document):
    assert isinstance(document["search"].pop("wall_s"), float)
    return document


def layout_lines(path):
    return path.read_text().splitlines(keepends=True)[1:]


@pytest.fixture(scope="module")
def uninterrupted():
    return without_wall_time(bmpipe.search(CONFIG, **KWARGS))


def check_resumes(journal, uninterrupted):
    """The journal a budget cut holds some layouts, not all; resume= finishes the search with
    the uninterrupted report, keeping those lines and appending the others."""
    before = layout_lines(journal)
    assert 0 < len(before) < uninterrupted["search"]["layouts"]
    assert without_wall_time(bmpipe.search(CONFIG, **KWARGS, resume=journal)) == uninterrupted
    after = layout_lines(journal)
    assert after[:len(before)] == before
    assert len(after) == uninterrupted["search"]["layouts"]


def test_a_search_a_budget_stopped_resumes_to_the_uninterrupted_report(tmp_path, uninterrupted):
    journal = tmp_path / "journal"
    first = bmpipe.search(CONFIG, **KWARGS, max_evals=BUDGET, journal=journal)
    assert first["search"]["stopped_by"] == "evaluation limit"
    assert without_wall_time(first) != uninterrupted
    check_resumes(journal, uninterrupted)


def test_a_journal_the_executable_began_resumes_in_python(tmp_path, uninterrupted):
    journal = tmp_path / "journal"
    rc, out, err = run_cli("search", CONFIG, *ARGS, "--max-evals", BUDGET, "--quiet", "--json",
                           "--journal", journal)
    assert rc == 0, err
    assert json.loads(out)["search"]["stopped_by"] == "evaluation limit"
    check_resumes(journal, uninterrupted)


def test_resume_and_journal_together_are_refused(tmp_path):
    with pytest.raises(ValueError, match="resume= and journal= name the same file"):
        bmpipe.search(CONFIG, **KWARGS, journal=tmp_path / "a", resume=tmp_path / "a")
    assert not (tmp_path / "a").exists()
