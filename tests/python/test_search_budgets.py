"""search()'s budgets and margin are the command's: max_evals and time_limit_s bound the
whole search (search.stopped_by says which stopped it), layout_evals is the per-layout
budget of planner='full', margin_GiB is kept free below the limit."""
import json

import pytest

import bmpipe
from conftest import TINY, run_cli


def without_wall_time(document):
    document["search"].pop("wall_s")
    return document


@pytest.mark.parametrize("args,kwargs", [
    (["--planner", "off", "--max-evals", "3"], {"planner": "off", "max_evals": 3}),
    (["--planner", "off", "--margin-GiB", "0.25"], {"planner": "off", "margin_GiB": 0.25}),
    (["--planner", "full", "--layout-evals", "50"], {"planner": "full", "layout_evals": 50}),
])
def test_search_budgets_match_the_command(args, kwargs):
    code, out, err = run_cli("search", TINY, "--json", "--quiet", *args)
    assert code == 0, err
    got = without_wall_time(bmpipe.search(str(TINY), **kwargs))
    assert got == without_wall_time(json.loads(out))


def test_search_max_evals_is_total_and_says_so():
    # tiny.yaml: 8 layouts at 1 evaluation each with planner 'off'.
    got = bmpipe.search(str(TINY), planner="off", max_evals=3)
    assert got["search"]["evaluations"] == 3
    assert got["search"]["stopped_by"] == "evaluation limit"
    assert bmpipe.search(str(TINY), planner="off")["search"]["stopped_by"] == "done"


@pytest.mark.parametrize("kwargs,key", [
    ({"max_evals": 0}, "max_evals"),
    ({"layout_evals": 0}, "layout_evals"),
    ({"time_limit_s": 0}, "time_limit_s"),
    ({"margin_GiB": -1}, "margin_GiB"),
])
def test_search_bad_budgets_name_the_keyword(kwargs, key):
    with pytest.raises(ValueError) as e:
        bmpipe.search(str(TINY), **kwargs)
    assert key in str(e.value)
