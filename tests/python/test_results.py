"""What the module returns, checked against closed forms of the tiny unit-cost config
(configs/examples/tiny.yaml: p = 4 stages of F = 1 ms and B = I + W = 2 ms, free
communication): 1F1B and GPipe take (m + p - 1)(F + B), with bubble ratio
(p - 1)/(m + p - 1)."""
import math
import pathlib

import pytest

import bmpipe
from conftest import TINY, example


def closed_form(p, m, layers=8):
    """Iteration time (ms) and bubble ratio of 1F1B/GPipe on tiny.yaml's layers at pp = p:
    each stage holds layers/p layers of F = 0.5 ms and I = W = 0.5 ms."""
    per_stage = layers // p
    f, b = 0.5 * per_stage, 1.0 * per_stage
    return (m + p - 1) * (f + b), (p - 1) / (m + p - 1)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("pp,microbatches", [(4, 8), (4, 16), (2, 8), (1, 3)])
def test_simulate_matches_the_closed_form(schedule, pp, microbatches):
    s = bmpipe.simulate(str(TINY), schedule, pp=pp, microbatches=microbatches)
    time_ms, bubble = closed_form(pp, microbatches)
    assert s["ok"] is True
    assert (s["schedule"], s["pp"], s["vpp"], s["microbatches"]) == (schedule, pp, 1, microbatches)
    assert s["iteration_time_ms"] == pytest.approx(time_ms, abs=1e-9)
    assert s["bubble_ratio"] == pytest.approx(bubble, abs=1e-12)
    # One F and one full B per stage and micro-batch.
    assert s["ops_executed"] == 2 * pp * microbatches
    assert len(s["devices"]) == pp
    for d in s["devices"]:
        assert d["busy_ms"] == pytest.approx(microbatches * 1.5 * (8 // pp), abs=1e-9)


def test_split_backward_runs_three_ops_per_stage_and_microbatch():
    s = bmpipe.simulate(str(TINY), "zb-h1")
    assert s["ops_executed"] == 3 * 4 * 8


def test_types_are_plain_python():
    s = bmpipe.simulate(str(TINY))
    assert type(s) is dict and type(s["devices"]) is list
    assert type(s["pp"]) is int and type(s["ok"]) is bool
    assert type(s["iteration_time_ms"]) is float and type(s["schedule"]) is str
    assert type(s["devices"][0]["peak_memory_bytes"]) is int


def test_a_config_from_text_a_path_or_a_pathlike_is_the_same(tiny_text):
    from_file = bmpipe.load(str(TINY))
    from_path = bmpipe.load(pathlib.Path(TINY))
    from_text = bmpipe.load(tiny_text)
    assert from_file.file == str(TINY) and from_text.file == "<string>"
    assert (from_text.schedule, from_text.pp, from_text.vpp, from_text.microbatches) == \
        ("1f1b", 4, 1, 8)
    assert from_text.model == "unit-layers" and from_text.analytic is False
    expected = bmpipe.simulate(from_file)
    assert bmpipe.simulate(from_path) == expected
    # The same run; only the provenance says where the config came from.
    def without_provenance(document):
        return {k: v for k, v in document.items() if k != "bmpipe"}
    for text in (from_text, tiny_text):
        document = bmpipe.simulate(text)
        assert without_provenance(document) == without_provenance(expected)
        assert document["bmpipe"]["config"] == "<string>"
    assert expected["bmpipe"]["config"] == str(TINY)
    assert "tiny.yaml" in repr(from_file)


def test_a_config_is_left_as_it_was_by_overrides():
    c = bmpipe.load(str(TINY))
    assert bmpipe.simulate(c, pp=2)["pp"] == 2
    assert c.pp == 4 and bmpipe.simulate(c)["pp"] == 4
    with pytest.raises(AttributeError):
        c.pp = 2


def test_same_inputs_same_answer():
    cfg = example("h200_llama2_7b.yaml")
    assert bmpipe.simulate(cfg) == bmpipe.simulate(cfg)
    assert bmpipe.compare(cfg, ["1f1b", "zb-v"]) == bmpipe.compare(cfg, ["1f1b", "zb-v"])


def test_a_deadlock_is_a_result_naming_the_blocked_ops(tmp_path):
    # Rank 0 waits for B0's gradient before it sends F1; rank 1 waits for F1 before B0.
    csv = tmp_path / "cycle.csv"
    csv.write_text("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n")
    s = bmpipe.simulate(str(TINY), schedule_file=csv)
    assert s["ok"] is False and s["error"]
    assert [(b["rank"], b["op"]) for b in s["blocked"]] == [(0, "B0@s0"), (1, "F1@s1")]
    assert "iteration_time_ms" not in s


def test_a_schedule_file_sets_pp_and_microbatches(tmp_path):
    csv = tmp_path / "gpipe.csv"
    csv.write_text("0F0,0F1,0F2,0B0,0B1,0B2\n1F0,1F1,1F2,1B0,1B1,1B2\n")
    s = bmpipe.simulate(str(TINY), schedule_file=str(csv))
    time_ms, bubble = closed_form(2, 3)
    assert (s["pp"], s["microbatches"]) == (2, 3)
    assert s["iteration_time_ms"] == pytest.approx(time_ms, abs=1e-9)
    assert s["bubble_ratio"] == pytest.approx(bubble, abs=1e-12)


def test_compare_lists_the_fastest_first_and_refusals_last():
    # dualpipe-v needs m >= 2p micro-batches: with m = 4 and p = 4 it refuses the config.
    rows = bmpipe.compare(str(TINY), ["gpipe", "dualpipe-v", "1f1b"], microbatches=4)
    assert [r["schedule"] for r in rows] == ["gpipe", "1f1b", "dualpipe-v"]
    assert rows[0]["iteration_time_ms"] == pytest.approx(closed_form(4, 4)[0], abs=1e-9)
    assert rows[2]["ok"] is False and "dualpipe-v" in rows[2]["error"]


def test_cost_reports_the_layers_of_an_analytic_model():
    c = bmpipe.cost(example("gpt3_175b_a100.yaml"), ops=True)
    assert [layer["name"] for layer in c["layers"]][1] == "decoder"
    decoder = c["layers"][1]
    assert decoder["count"] == 96  # GPT-3 175B: 96 layers (Brown et al. 2020, Table 2.1)
    assert decoder["ops"] and all(op["forward_ms"] >= 0 for op in decoder["ops"])
    assert math.isclose(sum(op["forward_ms"] for op in decoder["ops"]), decoder["forward_ms"],
                        rel_tol=1e-9)
    assert "ops" not in bmpipe.cost(example("gpt3_175b_a100.yaml"))["layers"][1]


def test_plan_fits_the_limit_and_beats_no_baseline():
    p = bmpipe.plan(example("ascend910b_llama2_13b_analytic.yaml"), memory_limit_GiB=40,
                    threads=1)
    plan = p["plan"]
    limit = plan["memory_limit_bytes"]
    assert limit == round(40 * 2**30)
    assert plan["fits"] is True and max(plan["peak_memory_bytes"]) <= limit
    assert sum(plan["partition"]) == len(plan["layer_recompute"])
    for b in p["baselines"]:
        if b["fits"]:
            assert plan["iteration_time_ms"] <= b["iteration_time_ms"] + 1e-9, b["name"]


def test_plan_margin_lowers_the_limit():
    p = bmpipe.plan(example("ascend910b_llama2_13b_analytic.yaml"), memory_limit_GiB=40,
                    margin_GiB=2.5, threads=1, max_evals=50)
    assert p["plan"]["memory_limit_bytes"] == round(37.5 * 2**30)


def test_plan_auto_ranks_several_schedules():
    p = bmpipe.plan(example("ascend910b_llama2_13b_analytic.yaml"), memory_limit_GiB=40,
                    schedule="auto", threads=1, max_evals=100)
    ranked = p["schedules"]
    assert len(ranked) > 1 and ranked[0]["schedule"] == p["plan"]["schedule"]
    fitting = [r["iteration_time_ms"] for r in ranked if r["fits"]]
    assert fitting == sorted(fitting)


def test_schedules_lists_the_builtins():
    names = bmpipe.schedules()
    assert names[:2] == ["gpipe", "1f1b"] and "dualpipe-v" in names
    assert bmpipe.__version__.count(".") == 2
