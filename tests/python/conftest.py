"""Shared by the Python tests: where the sources and the bmpipe executable are, and a
runner for the executable. ctest sets BMPIPE_SOURCE_DIR, BMPIPE_BINARY and PYTHONPATH
(tests/python/CMakeLists.txt); run by hand, the defaults fit a build in build/."""
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("BMPIPE_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
BINARY = pathlib.Path(os.environ.get("BMPIPE_BINARY", SOURCE_DIR / "build" / "cli" / "bmpipe"))
EXAMPLES = SOURCE_DIR / "configs" / "examples"
TINY = EXAMPLES / "tiny.yaml"
# The search tests' medium space (tests/data/search_gpt3_24_layers.yaml): GPT-3's layer cut
# to 24 layers on 64 A100s; searches of the whole GPT-3 example take twenty times longer
# under the sanitizers.
MEDIUM = SOURCE_DIR / "tests" / "data" / "search_gpt3_24_layers.yaml"
# Under the sanitizers (tests/python/CMakeLists.txt sets BMPIPE_SANITIZED) the binding's
# memory is what is tested, and the plans of these hybrid examples, 0.8-3.8 s of CPU each in
# Release (plan --max-evals 20: their baselines' stage-option tables and exhaustive sweep),
# took 195 s of the sanitized suite's python.test_plan_same_as_cli; the Release suite
# compares them whole.
SANITIZED = os.environ.get("BMPIPE_SANITIZED") == "1"
SLOW_PLANS = {"h100_qwen3_next_80b.yaml", "h100_nemotron_h_56b_pp4.yaml",
              "h100_gemma3_27b.yaml", "h100_qwen25_vl_72b.yaml"}


def example(name):
    return str(EXAMPLES / name)


# The sanitizer runtimes ctest preloads for the interpreter (LD_PRELOAD) are not passed on:
# a clang-built executable carries its own, and refuses to start beside a second copy.
CLI_ENV = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def run_cli(*args):
    """Runs `bmpipe ARGS...`; returns (exit code, stdout, stderr)."""
    r = subprocess.run([str(BINARY), *map(str, args)], capture_output=True, text=True,
                       timeout=600, check=False, env=CLI_ENV)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="session")
def tiny_text():
    return TINY.read_text()


def gb200_llama2_7b(folder):
    """Llama-2-7B on 8 GB200 (NVLink-C2C host link), pp 8, 16 micro-batches of 4096 tokens:
    the offload tests' job (tests/planner/offload_plan_test.cpp), written into `folder`."""
    config = folder / "job.yaml"
    config.write_text(
        "cluster: {nodes: 1, devices_per_node: 8, device: {preset: gb200}}\n"
        "model: {preset: llama2-7b}\n"
        "training: {schedule: 1f1b, pp: 8, tp: 1, seq_length: 4096, micro_batch_size: 1,"
        " microbatches: 16}\n")
    return str(config)
