"""Bad input raises, naming what is wrong: bmpipe.ConfigError (a ValueError) with the
file, the 1-based line and the key path, as the CLI's message does; a keyword argument
that caused it is named as the keyword. Bad arguments are ValueError or TypeError;
nothing crashes and nothing falls back to a default silently."""
import json

import pytest

import bmpipe
from conftest import TINY, example, run_cli


def test_config_error_is_a_value_error_with_file_line_and_key(tiny_text):
    text = tiny_text.replace("  microbatches: 8", "  microbatchez: 8")
    line = 1 + text.splitlines().index("  microbatchez: 8")
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.load(text)
    assert isinstance(e.value, ValueError)
    assert (e.value.file, e.value.line, e.value.key) == ("<string>", line, "training.microbatchez")
    assert "unknown key" in e.value.message
    assert str(e.value).startswith(f"<string>:{line}: training.microbatchez: unknown key")


def test_a_cross_field_check_names_the_line(tmp_path, tiny_text):
    bad = tmp_path / "bad.yaml"
    bad.write_text(tiny_text.replace("  pp: 4", "  pp: 3"))
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.load(str(bad))
    line = 1 + tiny_text.splitlines().index("  pp: 4")
    assert (e.value.file, e.value.line, e.value.key) == (str(bad), line, "training.pp")
    rc, _, err = run_cli("simulate", bad)
    assert rc == 2 and err == f"bmpipe simulate: {e.value}\n"


def test_a_missing_file():
    for source in ["no/such/config.yaml", "missing.yml"]:
        with pytest.raises(bmpipe.ConfigError) as e:
            bmpipe.load(source)
        assert (e.value.file, e.value.line, e.value.key) == (source, None, None)
        assert "cannot open the file" in str(e.value)


def test_malformed_yaml_text_names_its_line():
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.load("cluster:\n  nodes: [1\n")
    assert e.value.file == "<string>" and e.value.line is not None


@pytest.mark.parametrize("kwargs,key", [
    ({"pp": 0}, "pp"),
    ({"microbatches": 0}, "microbatches"),
    ({"vpp": -1}, "vpp"),
    ({"schedule": "nope"}, "schedule"),
    ({"pp": 3}, "pp"),  # 3 does not divide the 4 devices
])
def test_an_override_is_named_by_its_keyword(kwargs, key):
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.simulate(str(TINY), **kwargs)
    assert (e.value.file, e.value.line, e.value.key) == (str(TINY), None, key)
    assert str(e.value) == f"{TINY}: {key}: {e.value.message}"


def test_cost_refuses_measured_layers():
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.cost(str(TINY))
    assert e.value.key == "model.layers" and e.value.line is not None


def test_a_bad_schedule_file_names_row_and_column(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("0F0,0X0\n")
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.simulate(str(TINY), schedule_file=csv)
    assert (e.value.file, e.value.line) == (str(csv), 1)
    assert str(e.value).startswith(f"{csv}:1:")


def test_a_schedule_file_excludes_overrides(tmp_path):
    with pytest.raises(ValueError, match="schedule_file"):
        bmpipe.simulate(str(TINY), pp=2, schedule_file=tmp_path / "x.csv")


def test_compare_rejects_unknown_and_empty_lists():
    with pytest.raises(ValueError, match="schedules: unknown schedule 'nope'"):
        bmpipe.compare(str(TINY), ["1f1b", "nope"])
    with pytest.raises(ValueError, match="schedules: the list is empty"):
        bmpipe.compare(str(TINY), [])
    with pytest.raises(TypeError):
        bmpipe.compare(str(TINY), "1f1b")  # a str, not a list of names


@pytest.mark.parametrize("kwargs,message", [
    ({"max_evals": 0}, "max_evals: must be at least 1"),
    ({"threads": -1}, "threads: must be 0 or more"),
    ({"time_limit_s": 0}, "time_limit_s: must be greater than 0 seconds"),
    ({"margin_GiB": -1}, "margin_GiB: must be 0 or more GiB"),
    ({"memory_limit_GiB": float("nan")}, "memory_limit_GiB: must be a positive number of GiB"),
    ({"memory_limit_GiB": 1, "margin_GiB": 2}, "margin_GiB: leaves no memory below the limit"),
    ({"baseline": "nope"}, "baseline: unknown baseline 'nope'"),
    ({"baseline": "megatron-default"},
     "baseline: 'megatron-default' is now called 'megatron-full-recompute'"),
    ({"expressible": "megatorn"},
     "expressible: unknown framework 'megatorn' (did you mean 'megatron'?)"),
    ({"baseline_layout": "Et*4|x"}, "baseline_layout: 'Et*4|x': "),
    ({"offload": "sometimes"}, "offload: 'sometimes' is not a choice"),
])
def test_plan_rejects_bad_options(kwargs, message):
    with pytest.raises(ValueError) as e:
        bmpipe.plan(str(TINY), **kwargs)
    assert str(e.value).startswith(message)
    assert not isinstance(e.value, bmpipe.ConfigError)


def test_plan_that_cannot_fit_says_how_close_it_came():
    config = example("ascend910b_llama2_13b_analytic.yaml")
    with pytest.raises(bmpipe.NoPlanFitsError) as e:
        bmpipe.plan(config, memory_limit_GiB=1, threads=1)
    assert isinstance(e.value, RuntimeError)
    rc, _, err = run_cli("plan", config, "--memory-limit-GiB", "1", "--quiet", "--threads", "1")
    assert rc == 2 and err == f"bmpipe plan: {e.value}\n"
    assert "rank 0" in str(e.value)


def test_wrong_argument_types_are_type_errors():
    with pytest.raises(TypeError):
        bmpipe.simulate(str(TINY), pp="4")
    with pytest.raises(TypeError):
        bmpipe.simulate(str(TINY), microbatches=2.5)
    with pytest.raises(TypeError):
        bmpipe.plan(str(TINY), 40)  # options are keywords only
    with pytest.raises(TypeError):
        bmpipe.load(42)
    with pytest.raises(TypeError):
        bmpipe.Config()


def test_unknown_keywords_name_the_closest_option():
    # plan() and search() take the command's options from the request tables
    # (api/request_table.hpp): a typo is a TypeError naming the keyword meant.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'memory_limit_gib' "
                                        r"\(did you mean 'memory_limit_GiB'\?\)"):
        bmpipe.plan(str(TINY), memory_limit_gib=3)
    with pytest.raises(TypeError, match=r"'screen_eval' \(did you mean 'screen_evals'\?\)"):
        bmpipe.search(str(TINY), screen_eval=8)
    with pytest.raises(TypeError, match="tp: expected a list of ints, got str"):
        bmpipe.search(str(TINY), tp="8")


def test_plan_takes_the_commands_overrides():
    # --microbatches 4 on the command line and microbatches=4 here plan the same job, and
    # --set wins over a knob of the same key (set=... after microbatches).
    fast = dict(max_evals=50, threads=1)
    got = bmpipe.plan(str(TINY), microbatches=4, set={"training.microbatches": 8}, **fast)
    rc, out, _ = run_cli("plan", str(TINY), "--microbatches", "4", "--set",
                         "training.microbatches=8", "--max-evals", "50", "--threads", "1",
                         "--json", "--quiet")
    assert rc == 0
    cli = json.loads(out)
    assert got["plan"] == cli["plan"]
