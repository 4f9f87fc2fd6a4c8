"""export_config() returns what `bmpipe export CONFIG --format F --json` prints."""
import json

import pytest

import bmpipe
from conftest import example, run_cli


@pytest.mark.parametrize("name,fmt,limit", [
    ("ascend910b_llama2_13b_analytic.yaml", "megatron", None),
    ("ascend910b_llama2_13b_analytic.yaml", "mindformers", None),
    ("h200_llama2_7b_dualpipe_v.yaml", "megatron", None),
    ("h200_llama2_7b.yaml", "mindformers", 60),
])
def test_export(name, fmt, limit):
    args = ["export", example(name), "--format", fmt, "--json"]
    kwargs = {}
    if limit is not None:
        args += ["--memory-limit-GiB", str(limit)]
        kwargs["memory_limit_GiB"] = limit
    rc, out, err = run_cli(*args)
    assert rc == 0, err
    expected = json.loads(out)
    assert bmpipe.export_config(example(name), fmt, **kwargs) == expected
    assert expected["format"] == fmt and expected["text"].startswith("# bmpipe export")


def test_export_bad_format_names_the_keyword():
    with pytest.raises(ValueError) as e:
        bmpipe.export_config(example("tiny.yaml"), "megatorn")
    assert "format" in str(e.value) and "megatron" in str(e.value)
