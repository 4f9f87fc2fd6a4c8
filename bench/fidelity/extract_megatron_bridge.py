#!/usr/bin/env python3
"""Writes bench/fidelity/megatron_bridge_runs.json: the published Megatron-Bridge runs the
cost model is calibrated on, one row per configuration (its latest release), each with the
recipe of its model, GPU count, GPU and precision beside it.

Input: the two files the workplace keeps under shared/data/published/ (read-only copies of
NVIDIA-NeMo/Megatron-Bridge@067f987df03b8355b03192d88d70f1709fedf51a's
docs/performance-summary*.md tables and src/megatron/bridge/perf_recipes/ functions; their
README says how they were read). Run from the repository root:

    python3 bench/fidelity/extract_megatron_bridge.py ../shared/data/published

Which rows, and why:
- pretrain and sft rows (sft runs the same layers on packed sequences); lora rows are left
  out: frozen base weights have no weight-gradient GEMMs, which bmpipe does not model;
- Nemotron 3 Nano (a hybrid of Mamba-2, attention and MoE layers), whose recipes the shared
  recipes file lacks: read by hand from the perf recipes at the same commit (NANO_RECIPES);
- Nemotron 3 Super (a latent MoE with a hybrid MTP block, run at 2 depths sharing one
  block's weights) and Nemotron 3.5 Lightning (Nano's layers with the same MTP block), whose
  recipes the shared recipes file lacks too: read by hand (SUPER_RECIPES, LIGHTNING_RECIPES);
- not Nemotron 3 Ultra: no public copy of its HF config.json was found, which its recipes
  read the model from (AutoBridge.from_hf_pretrained); nor DeepSeek-V4-Flash: bmpipe cannot
  write its layers yet;
- not the 25.09 rows: that release's tables have no precision column;
- a configuration (model, system, GPUs, phase, precision) that appears in several releases
  counts once, at its latest release: software moves the figures between releases.
"""
import json
import pathlib
import sys

RELEASES = ["25.09", "25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06", "26.06.01",
            "26.08"]
FAMILY = {"LLAMA3_8B": "llama3_8b", "LLAMA3_70B": "llama3_70b", "LLAMA3.1_405B": "llama31_405b",
          "DeepSeekV3": "deepseek_v3", "DeepSeekV3 (w/o MTP)": "deepseek_v3",
          "DeepSeekV3 (w/ MTP)": "deepseek_v3", "GPT OSS 120B": "gpt_oss_120b",
          "Kimi_K2": "kimi_k2", "Nemotron_3_Nano": "nemotron_3_nano",
          "Nemotron_3_Super": "nemotron_3_super",
          "Nemotron_3_5_Lightning": "nemotron_3_5_lightning"}
# Nemotron 3 Nano's perf recipes, read at 067f987d from
# src/megatron/bridge/perf_recipes/nemotronh/<gpu>/nemotronh.py (the functions
# nemotron_3_nano_pretrain_<n>gpu_<gpu>_<precision>_config) and common.py's
# _apply_nemotron_3_nano_perf_defaults, which sets recompute_granularity None: every
# Blackwell recipe runs the hybridep flex backend, transformer_engine CUDA graphs of attn,
# mamba, moe_router and moe_preprocess, no recompute; the H100 FP8-CS one graphs attn and
# mamba and recomputes the layernorms (selective, ["layernorm"]).
_NANO_BW = {"moe_flex_backend": "hybridep", "cuda_graph_impl": "transformer_engine",
            "cuda_graph_scope": '["attn", "mamba", "moe_router", "moe_preprocess"]',
            "recompute_granularity": "None", "tp": "1", "pp": "1"}
NANO_RECIPES = {
    f"nemotron_3_nano_pretrain_8gpu_{gpu}_{p}_config": dict(
        _NANO_BW, source="NVIDIA-NeMo/Megatron-Bridge@067f987df0 src/megatron/bridge/perf_recipes/"
        f"nemotronh/{gpu}/nemotronh.py::nemotron_3_nano_pretrain_8gpu_{gpu}_{p}_config")
    for gpu in ("b200", "b300", "gb200", "gb300") for p in ("bf16", "fp8mx", "nvfp4")}
NANO_RECIPES["nemotron_3_nano_pretrain_16gpu_h100_fp8cs_config"] = {
    "moe_flex_backend": "hybridep", "cuda_graph_impl": "transformer_engine",
    "cuda_graph_scope": '["attn", "mamba"]', "recompute_granularity": "selective",
    "recompute_modules": '["layernorm"]', "tp": "1", "pp": "1",
    "source": "NVIDIA-NeMo/Megatron-Bridge@067f987df0 src/megatron/bridge/perf_recipes/nemotronh/"
              "h100/nemotronh.py::nemotron_3_nano_pretrain_16gpu_h100_fp8cs_config"}
# Nemotron 3 Super's perf recipes, read at 067f987d from
# src/megatron/bridge/perf_recipes/nemotronh/<gpu>/nemotronh.py (the functions
# nemotron_3_super_pretrain_64gpu_<gpu>_<precision>_config) and common.py's
# _apply_nemotron_3_super_perf_defaults. Every one starts from
# recipes/nemotronh/h100/nemotron_3_super.py's 16-GPU config: the HF model (AutoBridge), MTP
# at 2 depths of one shared block (mtp_num_layers 2, mtp_use_repeated_layer), no recompute,
# comm_overlap None (no tp overlap); each sets the hybridep flex dispatcher (ETP 1) and:
#   gb200: tp 2 with sequence parallelism, ep 64, TE graphs of attn, mamba, moe_router,
#          moe_preprocess;
#   gb300: tp 1, ep 64, the same graphs;
#   b200:  bf16 tp 1, ep 64, selective ["moe_act", "moe", "layernorm", "core_attn"], no
#          graphs; fp8mx tp 1, ep 64, selective ["moe_act", "layernorm"], no graphs; nvfp4
#          tp 2 with sequence parallelism, ep 64, no recompute, the graphs;
#   b300:  tp 1, ep 8, the graphs; bf16 and nvfp4 selective ["moe_act", "layernorm"], fp8mx
#          none.
# The NVFP4 recipes also load perf_recipes/nemotronh/te_quant.cfg, which keeps the attention
# projections, the latent projections and the MTP block in bf16 and the Mamba out_proj in
# MXFP8 (noted beside each row: bmpipe runs one recipe throughout, the MTP block aside).
_SUPER_GRAPHS = '["attn", "mamba", "moe_router", "moe_preprocess"]'
_SUPER_SELECTIVE_2 = '["moe_act", "layernorm"]'
_SUPER_SELECTIVE_4 = '["moe_act", "moe", "layernorm", "core_attn"]'


def _super(gpu, precision, tp, ep, graphs, modules=None):
    recipe = {"moe_flex_backend": "hybridep", "tp": str(tp), "pp": "1", "ep": str(ep),
              "tp_comm_overlap": "False", "mtp_num_layers": "2",
              "mtp_use_repeated_layer": "True",
              "cuda_graph_impl": "transformer_engine" if graphs else "none",
              "cuda_graph_scope": _SUPER_GRAPHS if graphs else "[]",
              "recompute_granularity": "selective" if modules else "None",
              "source": "NVIDIA-NeMo/Megatron-Bridge@067f987df0 src/megatron/bridge/"
                        f"perf_recipes/nemotronh/{gpu}/nemotronh.py::"
                        f"nemotron_3_super_pretrain_64gpu_{gpu}_{precision}_config"}
    if modules:
        recipe["recompute_modules"] = modules
    if precision == "nvfp4":
        recipe["quant_recipe"] = "te_quant.cfg"
    return recipe


SUPER_RECIPES = {
    f"nemotron_3_super_pretrain_64gpu_{gpu}_{p}_config": _super(gpu, p, *args)
    for gpu, p, args in [
        ("gb200", "bf16", (2, 64, True)), ("gb200", "fp8mx", (2, 64, True)),
        ("gb200", "nvfp4", (2, 64, True)),
        ("gb300", "bf16", (1, 64, True)), ("gb300", "fp8mx", (1, 64, True)),
        ("gb300", "nvfp4", (1, 64, True)),
        ("b200", "bf16", (1, 64, False, _SUPER_SELECTIVE_4)),
        ("b200", "fp8mx", (1, 64, False, _SUPER_SELECTIVE_2)),
        ("b200", "nvfp4", (2, 64, True)),
        ("b300", "bf16", (1, 8, True, _SUPER_SELECTIVE_2)), ("b300", "fp8mx", (1, 8, True)),
        ("b300", "nvfp4", (1, 8, True, _SUPER_SELECTIVE_2))]}
# Nemotron 3.5 Lightning's perf recipes (same files, nemotron_3_5_lightning_pretrain_8gpu_
# <gpu>_<precision>_config): Nano's recipe of that GPU and precision (its HybridModelProvider,
# Nano's layers) with mtp_num_layers 2 of the hybrid MTP block "*E", mtp_use_repeated_layer.
# The table's one row is GB200 MXFP8: _build_nemotron_3_5_lightning_gb200_mxfp8, Nano's
# GB200 MXFP8 build (hybridep, TE graphs of attn, mamba, moe_router, moe_preprocess, no
# recompute).
LIGHTNING_RECIPES = {
    f"nemotron_3_5_lightning_pretrain_8gpu_{gpu}_{p}_config": dict(
        _NANO_BW, mtp_num_layers="2", mtp_hybrid_override_pattern="*E",
        mtp_use_repeated_layer="True",
        source="NVIDIA-NeMo/Megatron-Bridge@067f987df0 src/megatron/bridge/perf_recipes/"
        f"nemotronh/{gpu}/nemotronh.py::nemotron_3_5_lightning_pretrain_8gpu_{gpu}_{p}_config")
    for gpu in ("b200", "b300", "gb200", "gb300") for p in ("bf16", "fp8mx", "nvfp4")}
# The table's precision label -> the recipe's suffix. 26.x tables say FP8 for what 25.11
# called FP8-CS (current scaling); "FP8-CS (FP8-MX)" is an FP8-CS row with the MX figure in
# parentheses.
PRECISION = {"BF16": "bf16", "FP8": "fp8cs", "FP8-CS": "fp8cs", "FP8-CS (FP8-MX)": "fp8cs",
             "MXFP8": "fp8mx", "FP8-MX": "fp8mx", "NVFP4": "nvfp4"}
# Where the extracted recipe is not what the function runs, read against the function at the
# same commit: deepseek_v3_pretrain_256gpu_gb200_fp8mx_config sets cuda_graph_impl
# transformer_engine with the attn, moe_router and moe_preprocess scopes, then calls
# _enable_deepseek_full_iteration_mxfp8 (perf_recipes/deepseek/common.py), which sets
# cuda_graph_impl full_iteration and an empty scope; the extraction kept the first.
CORRECTIONS = {
    "deepseek_v3_pretrain_256gpu_gb200_fp8mx_config": {
        "cuda_graph_impl": "full_iteration", "cuda_graph_scope": "[]",
        "why": "src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py calls "
               "_enable_deepseek_full_iteration_mxfp8 (deepseek/common.py) last, which sets "
               "cuda_graph_impl full_iteration and cuda_graph_scope []"},
}
SYSTEM = {"DGX-H100": "h100", "DGX-B200": "b200", "DGX-B300": "b300", "DGX-GB200": "gb200",
          "DGX-GB300": "gb300"}


def main(folder: str) -> None:
    folder = pathlib.Path(folder)
    perf = json.loads((folder / "megatron_bridge_perf.json").read_text())
    recipes = json.loads((folder / "megatron_bridge_recipes.json").read_text())["recipes"]
    latest = {}
    for row in perf["rows"]:
        family = FAMILY.get(row["model"])
        precision = PRECISION.get(row["precision"] or "")
        if family is None or precision is None or row["phase"] == "lora":
            continue
        key = (family, row["system"], row["gpus"], row["phase"], precision)
        if key not in latest or RELEASES.index(row["release"]) > RELEASES.index(
                latest[key]["release"]):
            latest[key] = row
    out = []
    for (family, system, gpus, phase, precision), row in sorted(latest.items()):
        name = f"{family}_{phase}_{gpus}gpu_{SYSTEM[system]}_{precision}_config"
        recipe = (recipes.get(name) or NANO_RECIPES.get(name) or SUPER_RECIPES.get(name) or
                  LIGHTNING_RECIPES.get(name))
        keep = {k: row[k] for k in ("release", "model", "system", "phase", "gpus", "precision",
                                    "gbs", "mbs", "seq", "tp", "pp", "cp", "vp", "ep", "fsdp",
                                    "tokens_per_s_per_gpu", "model_tflops_per_gpu") if k in row}
        keep["id"] = f"{family}_{phase}_{gpus}gpu_{SYSTEM[system]}_{precision}"
        keep["family"] = family
        keep["recipe_precision"] = precision
        keep["source"] = (f"NVIDIA-NeMo/Megatron-Bridge@067f987df03b8355b03192d88d70f1709fedf51a "
                          f"{row['source_file']}:{row['source_line']}")
        if recipe:
            keep["recipe"] = dict(recipe)
            if name in CORRECTIONS:
                fix = dict(CORRECTIONS[name])
                keep["recipe_correction"] = fix.pop("why")
                keep["recipe"].update(fix)
        out.append(keep)
    doc = {
        "source": perf["source"],
        "recipes_source": recipes and json.loads(
            (folder / "megatron_bridge_recipes.json").read_text())["source"],
        "notes": perf["notes"],
        "selection": __doc__.split("Which rows, and why:")[1].strip(),
        "rows": out,
    }
    target = pathlib.Path(__file__).with_name("megatron_bridge_runs.json")
    target.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"{len(out)} rows -> {target}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/published")
