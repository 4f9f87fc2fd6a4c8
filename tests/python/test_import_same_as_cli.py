"""import_config() returns the YAML `bmpipe import` prints, byte for byte; the ignored flags
and notes the command lists on stderr come as warnings; the text loads and simulates."""
import warnings

import pytest

import bmpipe
from conftest import SOURCE_DIR, example, run_cli

CONFIGS = SOURCE_DIR / "configs"
MEGATRON = example("llama2_13b_megatron_args.txt")
# A MindFormers YAML of a Llama-2-7B-shaped job on 8 devices, with an uneven split.
MINDFORMERS_YAML = """parallel_config: {data_parallel: 1, model_parallel: 2, pipeline_stage: 4,
                  micro_batch_num: 8}
model:
  model_config: {num_layers: 32, hidden_size: 4096, num_heads: 32, vocab_size: 32000,
                 seq_length: 4096, compute_dtype: bfloat16, offset: [1, 1, 0, -2]}
recompute_config: {recompute: True}
optimizer: {type: AdamW}
"""
PROFILE = str(CONFIGS / "profiles" / "h200_llama2_7b.csv")
CLUSTER = str(CONFIGS / "clusters" / "h100_2x8.yaml")


@pytest.mark.parametrize("args,call", [
    (["megatron", MEGATRON, "--preset", "h200", "--devices", "16"],
     ("megatron", MEGATRON, {"preset": "h200", "devices": 16})),
    (["megatron", MEGATRON, "--cluster", CLUSTER],
     ("megatron", MEGATRON, {"cluster": CLUSTER})),
    (["mindformers", "MINDFORMERS", "--preset", "ascend-910b"],
     ("mindformers", "MINDFORMERS", {"preset": "ascend-910b"})),
    (["profile", PROFILE, "--preset", "h200", "--devices", "8", "--pp", "8", "--microbatches", "32"],
     ("profile", PROFILE, {"preset": "h200", "devices": 8, "pp": 8, "microbatches": 32})),
])
def test_import(args, call, tmp_path):
    mindformers = tmp_path / "llama2_7b_pp4.yaml"
    mindformers.write_text(MINDFORMERS_YAML)
    args = [str(mindformers) if a == "MINDFORMERS" else a for a in args]
    call = (call[0], str(mindformers) if call[1] == "MINDFORMERS" else call[1], call[2])
    rc, out, err = run_cli("import", *args)
    assert rc == 0, err
    fmt, path, kwargs = call
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = bmpipe.import_config(fmt, path, **kwargs)
    assert text == out
    said = [line for line in err.splitlines() if line.startswith(("ignored: ", "note: "))]
    assert [str(w.message) for w in caught] == said
    summary = bmpipe.simulate(bmpipe.load(text))
    assert summary["ok"] is True


@pytest.mark.parametrize("kwargs,key", [
    ({"preset": "h200"}, "devices"),                      # megatron needs --devices
    ({"preset": "h200", "devices": 16, "cluster": CLUSTER}, "cluster"),
    ({}, "cluster"),                                      # no cluster at all
    ({"preset": "h200", "devices": 16, "pp": 2}, "pp"),   # only profiles take a layout
])
def test_import_bad_options_name_the_keyword(kwargs, key):
    with pytest.raises(ValueError) as e:
        bmpipe.import_config("megatron", MEGATRON, **kwargs)
    assert key in str(e.value)


def test_import_unknown_format_lists_the_known_ones():
    with pytest.raises(ValueError) as e:
        bmpipe.import_config("deepspeed", MEGATRON, preset="h200", devices=16)
    assert "megatron, mindformers, torchtitan or profile" in str(e.value)


def test_import_unknown_preset_gives_the_commands_text():
    """A misspelt preset is checked first, by the one function both call
    (api::check_import_preset): the same suggestion and list; only the option's spelling
    differs (--preset on the command line, preset here)."""
    rc, out, err = run_cli("import", "megatron", MEGATRON, "--preset", "h100", "--devices", "16")
    assert rc == 2 and out == ""
    with pytest.raises(ValueError) as e:
        bmpipe.import_config("megatron", MEGATRON, preset="h100", devices=16)
    assert str(e.value).startswith("preset: unknown hardware preset 'h100' "
                                   "(did you mean 'h100-sxm'?) (known: ")
    assert err == f"bmpipe import megatron: --{e.value}\n"


def test_import_unmodelled_flags_refused_unless_allowed(tmp_path):
    """A flag that changes time or memory in a way bmpipe does not model (issue 17): a
    ConfigError naming the file, the line and the flag, as the command exits 2; with
    allow_unmodelled=True the same text as `--allow-unmodelled`, and the same warnings."""
    args = tmp_path / "cp2.txt"
    with open(MEGATRON, encoding="utf-8") as f:
        args.write_text(f.read() + "  --wgrad-deferral-limit 2\n")
    rc, out, err = run_cli("import", "megatron", str(args), "--preset", "h200", "--devices", "16")
    assert rc == 2 and out == ""
    with pytest.raises(bmpipe.ConfigError) as e:
        bmpipe.import_config("megatron", str(args), preset="h200", devices=16)
    assert e.value.line == 10
    assert e.value.key == "--wgrad-deferral-limit"  # the file's word, not a Python keyword
    assert e.value.message.startswith("not modelled yet; the simulated job would differ")
    # The same text as the command's, after its "bmpipe import megatron: " prefix.
    assert err.rstrip("\n") == "bmpipe import megatron: " + str(e.value)
    rc, out, err = run_cli("import", "megatron", str(args), "--preset", "h200", "--devices", "16",
                           "--allow-unmodelled")
    assert rc == 0, err
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = bmpipe.import_config("megatron", str(args), preset="h200", devices=16,
                                    allow_unmodelled=True)
    assert text == out
    said = [line for line in err.splitlines()
            if line.startswith(("ignored: ", "note: ", "warning: "))]
    assert [str(w.message) for w in caught] == said
    assert any(s.startswith("warning: --wgrad-deferral-limit 2 is not modelled") for s in said)
