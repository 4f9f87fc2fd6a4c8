"""Each function returns exactly what its command prints with --json: the same keys, the
same values, the same floats (the CLI prints doubles round-trip exact, so json.loads gives
back the very numbers). plan has its own file, test_plan_same_as_cli.py."""
import json

import pytest

import bmpipe
from conftest import EXAMPLES, TINY, run_cli

CONFIGS = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
ANALYTIC = [c for c in CONFIGS if bmpipe.load(c).analytic]


def cli_json(*args, expect_rc=(0,)):
    rc, out, err = run_cli(*args, "--json")
    assert rc in expect_rc, err
    return json.loads(out)


@pytest.mark.parametrize("config", CONFIGS)
def test_simulate(config):
    assert bmpipe.simulate(config) == cli_json("simulate", config)


@pytest.mark.parametrize("args,kwargs", [
    (["--schedule", "gpipe"], {"schedule": "gpipe"}),
    (["--pp", "2", "--microbatches", "6"], {"pp": 2, "microbatches": 6}),
    (["--schedule", "interleaved", "--pp", "2", "--vpp", "2"],
     {"schedule": "interleaved", "pp": 2, "vpp": 2}),
    (["--schedule", "dualpipe-v"], {"schedule": "dualpipe-v"}),
])
def test_simulate_with_overrides(args, kwargs):
    assert bmpipe.simulate(str(TINY), **kwargs) == cli_json("simulate", TINY, *args)


def test_simulate_a_deadlock(tmp_path):
    csv = tmp_path / "cycle.csv"
    csv.write_text("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n")
    expected = cli_json("simulate", TINY, "--schedule-file", csv, expect_rc=(1,))
    assert bmpipe.simulate(str(TINY), schedule_file=csv) == expected


@pytest.mark.parametrize("config", CONFIGS)
def test_compare(config):
    names = ["1f1b", "interleaved", "zb-v", "dualpipe-v", "zb-auto"]
    expected = cli_json("compare", config, "--schedules", ",".join(names), expect_rc=(0, 2))
    assert bmpipe.compare(config, names) == expected


@pytest.mark.parametrize("config", ANALYTIC)
@pytest.mark.parametrize("ops", [False, True])
def test_cost(config, ops):
    expected = cli_json("cost", config, *(["--ops"] if ops else []))
    assert bmpipe.cost(config, ops=ops) == expected
