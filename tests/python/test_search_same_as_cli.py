"""search() returns what `bmpipe search --json` prints, but for search.wall_s, a wall-clock
time; its options are the command's, spelt as keywords and lists."""
import json

import pytest

import bmpipe
from conftest import MEDIUM, example, gb200_llama2_7b, run_cli

CONFIG = str(MEDIUM)  # GPT-3's layer, 24 of them, on 64 A100s


def without_wall_time(document):
    assert isinstance(document["search"].pop("wall_s"), float)
    return document


@pytest.mark.parametrize("args,kwargs", [
    (["--planner", "off", "--tp", "8", "--pp", "4,8", "--micro-batch-size", "1"],
     {"planner": "off", "tp": [8], "pp": [4, 8], "micro_batch_size": [1]}),
    (["--tp", "8", "--pp", "8", "--micro-batch-size", "1,2", "--schedules", "1f1b,zb-h1",
      "--memory-limit-GiB", "40", "--seed", "3"],
     {"tp": [8], "pp": [8], "micro_batch_size": [1, 2], "schedules": ["1f1b", "zb-h1"],
      "memory_limit_GiB": 40, "seed": 3}),
    (["--planner", "off", "--tp", "4,8", "--pp", "8", "--vpp", "2", "--micro-batch-size", "1",
      "--schedules", "interleaved"],
     {"planner": "off", "tp": [4, 8], "pp": [8], "vpp": [2], "micro_batch_size": [1],
      "schedules": ["interleaved"]}),
    # Successive halving's knobs (issue 20): off, and no margin.
    (["--tp", "8", "--pp", "4,8", "--micro-batch-size", "1", "--screen-evals", "0"],
     {"tp": [8], "pp": [4, 8], "micro_batch_size": [1], "screen_evals": 0}),
    (["--tp", "8", "--pp", "4,8", "--micro-batch-size", "1", "--screen-evals", "32",
      "--screen-margin-pct", "0"],
     {"tp": [8], "pp": [4, 8], "micro_batch_size": [1], "screen_evals": 32,
      "screen_margin_pct": 0}),
])
def test_search(args, kwargs):
    rc, out, err = run_cli("search", CONFIG, *args, "--json", "--quiet")
    assert rc == 0, err
    expected = json.loads(out)
    got = bmpipe.search(CONFIG, **kwargs)
    assert without_wall_time(got) == without_wall_time(expected)
    assert got["layouts"], "the search found no layout at all"


MIXTRAL = example("h100_mixtral_8x7b_ep8.yaml")  # 8 experts on 64 H100s


@pytest.mark.parametrize("config,args,kwargs", [
    # ep and etp (issue 18): a mixture-of-experts model's expert layouts.
    (MIXTRAL, ["--planner", "off", "--tp", "2", "--pp", "4", "--micro-batch-size", "1",
               "--schedules", "1f1b", "--ep", "2,4,8", "--etp", "1,2"],
     {"planner": "off", "tp": [2], "pp": [4], "micro_batch_size": [1], "schedules": ["1f1b"],
      "ep": [2, 4, 8], "etp": [1, 2]}),
    (MIXTRAL, ["--tp", "2", "--pp", "4", "--micro-batch-size", "1", "--schedules", "1f1b",
               "--ep", "4,8"],
     {"tp": [2], "pp": [4], "micro_batch_size": [1], "schedules": ["1f1b"], "ep": [4, 8]}),
    # cp (issue 19): context parallel sizes, dp = devices / (tp pp cp).
    (CONFIG, ["--tp", "8", "--pp", "4,8", "--micro-batch-size", "1", "--schedules", "1f1b",
              "--cp", "1,2"],
     {"tp": [8], "pp": [4, 8], "micro_batch_size": [1], "schedules": ["1f1b"], "cp": [1, 2]}),
])
def test_search_experts_and_context(config, args, kwargs):
    rc, out, err = run_cli("search", config, *args, "--json", "--quiet")
    assert rc == 0, err
    expected = json.loads(out)
    got = bmpipe.search(config, **kwargs)
    assert without_wall_time(got) == without_wall_time(expected)
    key = "cp" if "cp" in kwargs else "ep"
    assert {layout[key] for layout in got["layouts"]} == set(kwargs[key])


def test_search_with_offload(tmp_path):
    # --offload auto (issue 43): every layout under each offload choice, the same document.
    config = gb200_llama2_7b(tmp_path)
    args = ["--tp", "1", "--pp", "8", "--micro-batch-size", "1", "--schedules", "1f1b",
            "--memory-limit-GiB", "24"]
    rc, out, err = run_cli("search", config, *args, "--offload", "auto", "--json",
                           "--quiet")
    assert rc == 0, err
    got = bmpipe.search(config, tp=[1], pp=[8], micro_batch_size=[1], schedules=["1f1b"],
                        memory_limit_GiB=24, offload="auto")
    assert without_wall_time(got) == without_wall_time(json.loads(out))
    assert {layout["offload_modules"] for layout in got["layouts"]} == {
        "none", "core_attn,attn_proj", "qkv_linear,core_attn,attn_proj"}


def test_search_threads_do_not_change_the_answer():
    one = bmpipe.search(CONFIG, tp=[8], pp=[4, 8], micro_batch_size=[1], threads=1)
    two = bmpipe.search(CONFIG, tp=[8], pp=[4, 8], micro_batch_size=[1], threads=2)
    assert without_wall_time(one) == without_wall_time(two)


@pytest.mark.parametrize("kwargs,key", [
    ({"planner": "fast"}, "planner"),
    ({"tp": []}, "tp"),
    ({"max_evals": 0}, "max_evals"),
    ({"memory_limit_GiB": -1}, "memory_limit_GiB"),
    ({"schedules": ["1fb1"]}, "schedules"),
    ({"cp": [0]}, "cp"),
    ({"cp": [3]}, "cp"),
    ({"ep": [2]}, "ep"),
    ({"cp": []}, "cp"),
    ({"screen_evals": -1}, "screen_evals"),
    ({"screen_margin_pct": -1}, "screen_margin_pct"),
    ({"planner": "off", "screen_evals": 32}, "screen_evals"),
    ({"planner": "full", "screen_margin_pct": 10}, "screen_margin_pct"),
])
def test_search_bad_options_name_the_keyword(kwargs, key):
    with pytest.raises(ValueError) as e:
        bmpipe.search(CONFIG, **kwargs)
    assert key in str(e.value)
