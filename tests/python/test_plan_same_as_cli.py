"""plan() returns what `bmpipe plan --json` prints, but for search.wall_s, a wall-clock
time. Small search budgets: the point is the same document, not a good plan."""
import json

import pytest

import bmpipe
from conftest import EXAMPLES, SANITIZED, SLOW_PLANS, gb200_llama2_7b, run_cli

CONFIGS = sorted(str(p) for p in EXAMPLES.glob("*.yaml")
                 if not (SANITIZED and p.name in SLOW_PLANS))


def cli_json(*args):
    rc, out, err = run_cli(*args, "--json")
    assert rc == 0, err
    return json.loads(out)


def without_wall_time(plan):
    assert isinstance(plan["search"].pop("wall_s"), float)
    return plan


@pytest.mark.parametrize("config", CONFIGS)
def test_plan(config):
    expected = cli_json("plan", config, "--quiet", "--threads", "1", "--max-evals", "20")
    got = bmpipe.plan(config, threads=1, max_evals=20)
    assert without_wall_time(got) == without_wall_time(expected)


@pytest.mark.parametrize("args,kwargs", [
    (["--memory-limit-GiB", "40", "--margin-GiB", "1.5"],
     {"memory_limit_GiB": 40, "margin_GiB": 1.5}),
    (["--memory-limit-GiB", "40", "--schedule", "auto", "--max-evals", "60", "--seed", "7"],
     {"memory_limit_GiB": 40, "schedule": "auto", "max_evals": 60, "seed": 7}),
    (["--memory-limit-GiB", "40", "--baseline", "adapipe-dp"],
     {"memory_limit_GiB": 40.0, "baseline": "adapipe-dp"}),
    (["--memory-limit-GiB", "30", "--expressible", "megatron", "--max-evals", "300"],
     {"memory_limit_GiB": 30, "expressible": "megatron", "max_evals": 300}),
    (["--memory-limit-GiB", "40", "--microbatches", "16", "--schedule", "zb-h1"],
     {"memory_limit_GiB": 40, "microbatches": 16, "schedule": "zb-h1"}),
    (["--memory-limit-GiB", "40", "--baseline-layout", "Et*4|(t*5|)*6t*6L", "--max-evals", "60"],
     {"memory_limit_GiB": 40, "baseline_layout": "Et*4|(t*5|)*6t*6L", "max_evals": 60}),
])
def test_plan_with_options(args, kwargs):
    config = str(EXAMPLES / "ascend910b_llama2_13b_analytic.yaml")
    expected = cli_json("plan", config, "--quiet", "--threads", "2", *args)
    got = bmpipe.plan(config, threads=2, **kwargs)
    assert without_wall_time(got) == without_wall_time(expected)


def test_plan_with_offload(tmp_path):
    # Activation offload and its lead chosen beside recompute (issue 43): the same plan and
    # the same offload rows as `bmpipe plan --offload auto`. Llama-2-7B on 8 GB200, pp 8:
    # seven plans of a second's fraction each (the 405B example takes seconds).
    config = gb200_llama2_7b(tmp_path)
    args = ["--memory-limit-GiB", "24", "--max-evals", "100"]
    expected = cli_json("plan", config, "--quiet", "--threads", "2", *args,
                        "--offload", "auto")
    got = bmpipe.plan(config, threads=2, memory_limit_GiB=24, max_evals=100,
                      offload="auto")
    assert without_wall_time(got) == without_wall_time(expected)
    assert got["offload"]["tried"][0]["offload_modules"] == "none"
    assert got["offload"]["lead"] == 0
