"""simulate(), compare(), cost(), export_config() and report() take their keywords from the
request tables the command line's options come from (api/request_table.hpp, issue 38): an
option added to a table is a keyword at once, with the same default, the same check and the
same error text (only its spelling differs: --max-ops on the command line, max_ops here)."""
import json
import re

import pytest

import bmpipe
from conftest import TINY, example, run_cli

GPT3 = example("gpt3_175b_a100.yaml")


def cli_json(*args):
    rc, out, err = run_cli(*args, "--json")
    assert rc == 0, err
    return json.loads(out)


def as_cli(text):
    """A Python error's text as the command line prints it: the keyword that leads it
    ("max_ops: ...") spelt as the option ("--max-ops: ...")."""
    keyword, rest = str(text).split(": ", 1)
    return "--" + keyword.replace("_", "-") + ": " + rest


# Keywords none of these functions took before they came from the tables (seq_length,
# max_ops, global_batch_size, set): each gives what the command gives with the option.
@pytest.mark.parametrize("kwargs,args", [
    ({"seq_length": 1024}, ["--seq-length", "1024"]),
    ({"global_batch_size": 768, "max_ops": 10_000_000},
     ["--global-batch-size", "768", "--max-ops", "10000000"]),
])
def test_simulate_cost_compare_export_take_the_tables_options(kwargs, args):
    assert bmpipe.simulate(GPT3, **kwargs) == cli_json("simulate", GPT3, *args)
    assert bmpipe.cost(GPT3, **kwargs) == cli_json("cost", GPT3, *args)
    assert (bmpipe.compare(GPT3, ["1f1b", "gpipe"], **kwargs)
            == cli_json("compare", GPT3, "--schedules", "1f1b,gpipe", *args))
    assert (bmpipe.export_config(GPT3, "megatron", **kwargs)
            == cli_json("export", GPT3, "--format", "megatron", *args))


def test_the_options_change_the_result():
    # The keywords reach the run: half the sequence is less time per iteration.
    short = bmpipe.simulate(GPT3, seq_length=1024)["iteration_time_ms"]
    assert short < bmpipe.simulate(GPT3)["iteration_time_ms"]
    # A loaded Config takes the scalar overrides (applied to a copy), not set.
    config = bmpipe.load(TINY)
    assert bmpipe.export_config(config, "megatron", microbatches=4)["iteration_time_ms"] == \
        bmpipe.export_config(str(TINY), "megatron", microbatches=4)["iteration_time_ms"]
    with pytest.raises(ValueError, match="set: applies while the config is read"):
        bmpipe.cost(config, set={"training.seq_length": 1024})


def test_report_is_the_page_the_command_writes():
    rc, out, err = run_cli("report", TINY, "--out", "-", "--quiet")
    assert rc == 0, err
    assert bmpipe.report(str(TINY)) == out
    rc, out, err = run_cli("report", TINY, "--out", "-", "--quiet", "--compare", "1f1b,gpipe",
                           "--microbatches", "4")
    assert rc == 0, err
    assert bmpipe.report(str(TINY), compare=["1f1b", "gpipe"], microbatches=4) == out


@pytest.mark.parametrize("command,cli_args,call", [
    ("simulate", ["--max-ops", "0"], lambda: bmpipe.simulate(str(TINY), max_ops=0)),
    ("cost", ["--max-devices", "0"], lambda: bmpipe.cost(GPT3, max_devices=0)),
    ("compare", ["--schedules", "1f1b,1f1bb"],
     lambda: bmpipe.compare(str(TINY), ["1f1b", "1f1bb"])),
    ("export", ["--format", "megatron", "--memory-limit-GiB", "-1"],
     lambda: bmpipe.export_config(str(TINY), "megatron", memory_limit_GiB=-1)),
    ("export", ["--format", "megatrn"], lambda: bmpipe.export_config(str(TINY), "megatrn")),
    ("report", ["--out", "-", "--schedule", "auto"],
     lambda: bmpipe.report(str(TINY), schedule="auto")),
])
def test_a_bad_value_gives_the_commands_text(command, cli_args, call):
    config = GPT3 if command == "cost" else str(TINY)
    rc, out, err = run_cli(command, config, *cli_args)
    assert rc == 2 and out == ""
    with pytest.raises(ValueError) as e:
        call()
    assert not isinstance(e.value, bmpipe.ConfigError)
    assert err == f"bmpipe {command}: {as_cli(e.value)}\n"


@pytest.mark.parametrize("function,call", [
    ("simulate", lambda: bmpipe.simulate(str(TINY), microbatch=4)),
    ("compare", lambda: bmpipe.compare(str(TINY), ["1f1b"], seq_lenght=1024)),
    ("cost", lambda: bmpipe.cost(str(TINY), max_op=1)),
    ("export_config", lambda: bmpipe.export_config(str(TINY), "megatron", memory_limit_gib=1)),
    ("report", lambda: bmpipe.report(str(TINY), plans=True)),
])
def test_an_unknown_keyword_names_the_closest(function, call):
    with pytest.raises(TypeError) as e:
        call()
    assert re.fullmatch(rf"{function}\(\) got an unexpected keyword argument '\w+' "
                        r"\(did you mean '\w+'\?\)", str(e.value)), str(e.value)


def test_the_docstrings_list_the_tables_keywords():
    for function, keywords in [(bmpipe.simulate, ["schedule_file", "max_ops", "seq_length"]),
                               (bmpipe.compare, ["schedules", "partition", "set"]),
                               (bmpipe.cost, ["max_devices", "recompute"]),
                               (bmpipe.export_config, ["memory_limit_GiB", "schedule"]),
                               (bmpipe.report, ["compare", "plan", "search", "max_evals"])]:
        for k in keywords:
            assert f"\n  {k}" in function.__doc__, (function.__name__, k)
