#include "bench/fidelity/fidelity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "experiment/experiment.hpp"
#include "experiment/layer_table.hpp"

namespace bmpipe::fidelity {

namespace {

int int_field(const nlohmann::json& row, const char* key, int fallback) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return fallback;
  if (!it->is_number_integer())
    throw std::runtime_error(std::string("field ") + key + " is not an integer");
  return it->get<int>();
}

std::string text_field(const nlohmann::json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_string())
    throw std::runtime_error(std::string("field ") + key + " is missing or not text");
  return it->get<std::string>();
}

/// The recipe's value of `key`, or "" when it has none.
std::string recipe(const PublishedRun& run, const std::string& key) {
  const auto it = run.recipe.find(key);
  return it == run.recipe.end() ? std::string() : it->second;
}

struct Device {
  const char* preset;
  const char* generation;
};

/// DGX system -> bmpipe preset and generation (Hopper; Blackwell; Blackwell Ultra).
Device device_of(const std::string& system) {
  if (system == "DGX-H100") return {"h100-sxm", "hopper"};
  if (system == "DGX-B200") return {"b200", "blackwell"};
  if (system == "DGX-GB200") return {"gb200", "blackwell"};
  if (system == "DGX-B300") return {"b300", "blackwell-ultra"};
  if (system == "DGX-GB300") return {"gb300", "blackwell-ultra"};
  throw std::runtime_error("unknown system " + system);
}

bool is_moe(const PublishedRun& run) {
  return run.family == "deepseek_v3" || run.family == "kimi_k2" || run.family == "gpt_oss_120b" ||
         run.family == "nemotron_3_nano" || run.family == "nemotron_3_super" ||
         run.family == "nemotron_3_5_lightning";
}

/// The pipeline layout Megatron-Bridge's DeepSeek-V3 and Kimi-K2 recipes set when they call
/// set_deepseek_v3_pipeline_model_parallel_layout(cfg.model) or _get_kimi_k2_pipeline_layout
/// (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/recipes/deepseek/h100/
/// deepseek_v3.py, _get_deepseek_v3_pipeline_layout, and recipes/kimi/h100/kimi_k2.py,
/// _get_kimi_k2_pipeline_layout: the embedding with the first stage's layers, the loss (with
/// DeepSeek-V3's MTP module before it) after the last's), in Megatron-LM's layout syntax; or
/// the layout the GB300 DeepSeek-V3 recipes pass for pp 2 x vp 8 (perf_recipes/deepseek/
/// gb300/deepseek_v3.py: "Et*4|(t*4|)*14tmL"). Empty where the tables have no entry for the
/// row's pp and vp (Megatron-Bridge then leaves the layout unset).
std::string bridge_layout(const PublishedRun& run, int vp, bool mtp) {
  if (run.family != "deepseek_v3" && run.family != "kimi_k2") return "";
  const std::string last = (run.family == "deepseek_v3" && mtp ? "m" : "") + std::string("L");
  const auto is = [&](int p, int v) { return run.pp == p && vp == v; };
  if (is(4, 1)) return "Et*16|t*16|t*16|t*13" + last;
  if (is(8, 1) || is(4, 2)) return "Et*8|(t*8|)*6t*5" + last;
  // (2, 8): Kimi-K2's table, and the DeepSeek-V3 GB300 recipes' explicit layout.
  if (is(16, 1) || is(8, 2) || is(4, 4) || is(2, 8)) return "Et*4|(t*4|)*14t" + last;
  return "";
}

/// Decoder layers of the family's model (the HF configs and presets say the same).
int layers_of(const PublishedRun& run) {
  if (run.family == "llama3_8b") return 32;
  if (run.family == "llama3_70b") return 80;
  if (run.family == "llama31_405b") return 126;
  if (run.family == "gpt_oss_120b") return 36;
  if (run.family == "nemotron_3_nano" || run.family == "nemotron_3_5_lightning") return 52;
  if (run.family == "nemotron_3_super") return 88;
  return 61;  // deepseek_v3, kimi_k2
}

/// GPUs a node of the system holds (DGX H100/B200/B300: 8; a GB200/GB300 compute tray: 4).
int node_size(const std::string& system) {
  return system.rfind("DGX-GB", 0) == 0 ? 4 : 8;
}

}  // namespace

std::vector<PublishedRun> load_runs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the file");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not JSON: " + e.what());
  }
  std::vector<PublishedRun> out;
  const auto& rows = doc.at("rows");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    try {
      PublishedRun r;
      r.id = text_field(row, "id");
      r.family = text_field(row, "family");
      r.model = text_field(row, "model");
      r.system = text_field(row, "system");
      r.release = text_field(row, "release");
      r.phase = text_field(row, "phase");
      r.precision = text_field(row, "recipe_precision");
      r.source = text_field(row, "source");
      r.gpus = int_field(row, "gpus", 0);
      r.gbs = int_field(row, "gbs", 0);
      r.mbs = int_field(row, "mbs", 1);
      r.seq = int_field(row, "seq", 0);
      r.tp = int_field(row, "tp", 1);
      r.pp = int_field(row, "pp", 1);
      r.cp = int_field(row, "cp", 1);
      r.vp = int_field(row, "vp", 1);
      r.ep = int_field(row, "ep", 1);
      r.fsdp = int_field(row, "fsdp", 0);
      r.tokens_per_s_per_gpu = row.at("tokens_per_s_per_gpu").get<double>();
      if (const auto it = row.find("recipe"); it != row.end())
        for (const auto& [k, v] : it->items())
          if (v.is_string()) r.recipe[k] = v.get<std::string>();
      if (r.gpus < 1 || r.gbs < 1 || r.seq < 1 || !(r.tokens_per_s_per_gpu > 0))
        throw std::runtime_error("gpus, gbs, seq and tokens_per_s_per_gpu must be positive");
      out.push_back(std::move(r));
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": row " + std::to_string(i) + ": " + e.what());
    }
  }
  return out;
}

std::string group_of(const PublishedRun& run) {
  return std::string(device_of(run.system).generation) + (is_moe(run) ? " moe " : " dense ") +
         run.precision;
}

Expressed express(const PublishedRun& run, const std::string& source_dir,
                  const std::vector<std::string>& device_keys) {
  Expressed out;
  auto& approx = out.approximations;
  const Device device = device_of(run.system);
  const int per_node = node_size(run.system);
  std::ostringstream y;
  y << "# " << run.id << ": Megatron-Bridge " << run.release << ", " << run.model << " on "
    << run.gpus << " " << run.system << ", " << run.tokens_per_s_per_gpu << " tokens/s/GPU ("
    << run.source << ")\n";
  y << "cluster:\n  nodes: " << std::max(1, run.gpus / per_node) << "\n";
  y << "  devices_per_node: " << std::min(per_node, run.gpus) << "\n";
  // An NVL72 rack's 72 GPUs do not divide a 128- or 256-GPU job: such jobs run on 64 GPUs
  // (16 of the 18 compute trays) of each rack, a power of two.
  if (per_node == 4 && run.gpus > 64) y << "  scale_up_domain: 64\n";
  y << "  device:\n    preset: " << device.preset << "\n";
  for (const std::string& key : device_keys) y << "    " << key << "\n";

  // ---- model ------------------------------------------------------------------------------
  y << "model:\n";
  const std::string hf = source_dir + "/configs/presets/hf/";
  if (run.family == "llama3_8b") {
    y << "  preset: llama3-8b\n";
  } else if (run.family == "llama3_70b") {
    y << "  preset: llama3-70b\n";
  } else if (run.family == "llama31_405b") {
    // meta-llama/Llama-3.1-405B config.json: 126 layers, hidden 16384, 128 heads, 8 kv
    // heads, intermediate 53248, vocabulary 128256, untied embeddings.
    y << "  name: llama3.1-405b\n  architecture: llama\n  num_layers: 126\n"
         "  hidden_size: 16384\n  num_attention_heads: 128\n  num_kv_heads: 8\n"
         "  ffn_hidden_size: 53248\n  vocab_size: 128256\n";
  } else if (run.family == "deepseek_v3") {
    y << "  hf_config: " << hf << "deepseek-v3.json\n";
    // The 25.11 table says which rows ran without the MTP module; Megatron-Bridge's
    // DeepSeek-V3 recipe sets mtp_num_layers 1, which the other rows keep.
    if (run.model.find("w/o MTP") != std::string::npos) y << "  mtp_layers: 0\n";
    y << "  moe: {load_imbalance: 1}\n";  // force-balanced (the tables' footnote)
  } else if (run.family == "kimi_k2") {
    y << "  hf_config: " << hf << "kimi-k2.json\n  moe: {load_imbalance: 1}\n";
  } else if (run.family == "gpt_oss_120b") {
    // Fused attention (model.flash_attention's default), not the unfused core: the recipes
    // leave attention_backend None (recipes/gpt_oss/gpt_oss.py at v0.4.0, 2026-04-16, and
    // recipes/gpt_oss/h100/gpt_oss.py at 067f987d), TransformerEngine's auto choice; the
    // provider's fallback to AttnBackend.local applied below TE 2.8 alone (aa5cf7964,
    // gpt_oss_provider.py) and went with the provider (217de1a2e, 2026-03-16), while the
    // releases pin TE 2.14-2.17 (uv.lock at v0.4.0, v0.5.0, v0.6.0), whose cuDNN path runs
    // sink attention (TE 2.8, NVIDIA/TransformerEngine#2148). The unfused core would also
    // keep each layer's 4 x 64 x 4096 x 4096 bf16 probabilities, 8 GiB, 36 of them on one
    // 179 GiB B200.
    y << "  hf_config: " << hf << "gpt-oss-120b.json\n  moe: {load_imbalance: 1}\n";
  } else if (run.family == "nemotron_3_nano") {
    // nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B: 23 Mamba-2, 6 attention and 23 MoE layers.
    y << "  hf_config: " << hf << "nemotron-3-nano-30b-a3b.json\n  moe: {load_imbalance: 1}\n";
  } else if (run.family == "nemotron_3_super") {
    // nvidia/NVIDIA-Nemotron-3-Super-120B-A12B: 40 Mamba-2, 8 attention and 40 latent MoE
    // layers, and the MTP block "*E" (its config's one depth); the recipes run it at
    // mtp_num_layers depths of the one block (mtp_use_repeated_layer, the config's default).
    y << "  hf_config: " << hf << "nemotron-3-super-120b-a12b.json\n  moe: {load_imbalance: 1}\n";
    if (!recipe(run, "mtp_num_layers").empty())
      y << "  mtp_layers: " << recipe(run, "mtp_num_layers") << "\n";
  } else if (run.family == "nemotron_3_5_lightning") {
    // The Lightning recipes build Nano's HybridModelProvider and add the MTP block.
    y << "  hf_config: " << hf << "nemotron-3-nano-30b-a3b.json\n  moe: {load_imbalance: 1}\n";
    y << "  mtp_layers: " << recipe(run, "mtp_num_layers") << "\n  mtp_pattern: \""
      << recipe(run, "mtp_hybrid_override_pattern") << "\"\n  mtp_shared: "
      << (recipe(run, "mtp_use_repeated_layer") == "True" ? "true" : "false") << "\n";
  } else {
    throw std::runtime_error(run.id + ": unknown model family " + run.family);
  }

  // ---- layout -----------------------------------------------------------------------------
  y << "training:\n";
  // Megatron-Core asserts virtual stages with the EP all-to-all overlap under a pipeline
  // ("If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified
  // when pipeline_model_parallel_size > 1", NVIDIA/Megatron-LM d98e8a64
  // transformer_config.py): a row whose table gives none while its recipe overlaps ran with
  // the recipe's.
  int vp = std::max(1, run.vp);
  if (vp == 1 && run.pp > 1 && recipe(run, "moe_ep_overlap") == "True" && run.ep > 1 &&
      recipe(run, "pp") == std::to_string(run.pp) && std::atoi(recipe(run, "vp").c_str()) > 1) {
    vp = std::atoi(recipe(run, "vp").c_str());
    approx.push_back("vp " + std::to_string(vp) +
                     " from the recipe (the table gives none; Megatron-Core needs virtual stages "
                     "for the EP all-to-all overlap under a pipeline)");
  }
  y << "  schedule: " << (vp > 1 ? "interleaved" : "1f1b") << "\n";
  y << "  pp: " << run.pp << "\n";
  if (vp > 1) y << "  vpp: " << vp << "\n";
  y << "  tp: " << run.tp << "\n";
  if (run.cp > 1) y << "  cp: " << run.cp << "\n";
  if (is_moe(run) && run.ep > 1) y << "  ep: " << run.ep << "\n";
  if (run.tp > 1) y << "  sequence_parallel: true\n";
  // Megatron-Bridge's Llama recipes turn on TransformerEngine's tp overlap
  // (CommOverlapConfig(tp_comm_overlap=True)); a recipe may turn it off.
  if (run.tp > 1 && recipe(run, "tp_comm_overlap") != "False") y << "  tp_comm_overlap: true\n";
  y << "  seq_length: " << run.seq << "\n  micro_batch_size: " << run.mbs << "\n";
  y << "  global_batch_size: " << run.gbs << "\n";
  y << "  kernels: fused\n";
  // A recipe's pipeline layout applies when it was written for this row's pp and vp. Without
  // one, when the layers do not split evenly over the pp x vp stages but the layers with
  // the embedding and the loss as two more do (Megatron's
  // account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split, which
  // the 405B recipes set), each end takes a layer's place.
  std::string layout = recipe(run, "pipeline_layout");
  const int stages = run.pp * vp, layers = layers_of(run);
  // DeepSeek-V3's and Kimi-K2's recipes set theirs by a function of pp and vp, which the
  // extracted recipes name rather than state.
  if (layout.empty() || layout.find("_get_") != std::string::npos) {
    const std::string table =
        bridge_layout(run, vp, run.model.find("w/o MTP") == std::string::npos);
    if (!table.empty()) {
      y << "  megatron_layout: \"" << table << "\"\n";
      layout.clear();
    }
  }
  if (layout.empty() && bridge_layout(run, vp, true).empty() && layers % stages != 0 &&
      (layers + 2) % stages == 0 && stages > 1) {
    const int k = (layers + 2) / stages;
    const auto t = [](int n) {
      return n <= 0 ? std::string() : n == 1 ? "t" : "t*" + std::to_string(n);
    };
    layout = "E" + t(k - 1) + "|(" + t(k) + "|)*" + std::to_string(stages - 2) + t(k - 1) + "L";
    y << "  megatron_layout: \"" << layout << "\"\n";
    layout.clear();
  }
  if (!layout.empty()) {
    const bool same = recipe(run, "pp") == std::to_string(run.pp) &&
                      (recipe(run, "vp") == std::to_string(vp) ||
                       (vp == 1 && (recipe(run, "vp") == "None" || recipe(run, "vp").empty())));
    if (same && layout.find('(') != 0 && layout.find("_get_") == std::string::npos)
      y << "  megatron_layout: \"" << layout << "\"\n";
    else
      approx.push_back("pipeline layout " + layout + " not used (even split)");
  }

  // ---- precision --------------------------------------------------------------------------
  // Megatron-Bridge's precision configs (src/megatron/bridge/training/mixed_precision.py at
  // 067f987d): bf16_with_fp8_current_scaling_mixed and bf16_with_mxfp8_mixed set
  // fp8_param_gather = True, bf16_with_nvfp4_mixed fp4_param_gather = True: the GEMM weights
  // are kept in the low precision alone.
  if (run.precision == "fp8cs") {
    y << "  fp8: hybrid\n  fp8_recipe: tensorwise\n  fp8_param_gather: true\n";
  } else if (run.precision == "fp8mx") {
    y << "  fp8: e4m3\n  fp8_recipe: mxfp8\n  fp8_param_gather: true\n";
  } else if (run.precision == "nvfp4") {
    y << "  fp8: e4m3\n  fp8_recipe: nvfp4\n  fp8_param_gather: true\n";
  }

  // ---- memory levers ----------------------------------------------------------------------
  const std::string granularity = recipe(run, "recompute_granularity");
  const std::string block = recipe(run, "recompute_num_layers");
  if (granularity == "full" && recipe(run, "recompute_method") == "block" && !block.empty()) {
    // Megatron's block method: the first N layers of every (virtual) pipeline stage
    // recompute in full, the others none. Stages hold layers / (pp x vp) layers in order.
    const int per_stage = layers_of(run) / (run.pp * vp);
    const int n = std::stoi(block);
    y << "  recompute:\n    default: none\n    layers: {";
    bool first = true;
    for (int l = 0; l < layers_of(run); ++l)
      if (per_stage > 0 && l % per_stage < n) {
        y << (first ? "" : ", ") << l << ": full";
        first = false;
      }
    y << "}\n";
  } else if (granularity == "full") {
    y << "  recompute: full\n";
  } else if (granularity == "selective") {
    // Megatron-Core's recompute modules, as the recipe lists them (["mla_up_proj", "mlp"]):
    // bmpipe's training.recompute_modules names the same ones; [] re-runs nothing.
    std::string modules;
    for (char ch : recipe(run, "recompute_modules"))
      if (ch == ',')
        modules += ',';
      else if (ch != '[' && ch != ']' && ch != '"' && ch != ' ')
        modules += ch;
    y << "  recompute: selective\n";
    if (!modules.empty()) y << "  recompute_modules: " << modules << "\n";
    if (recipe(run, "recompute_modules") == "[]") y << "  recompute_modules: none\n";
  } else {
    y << "  recompute: none\n";
  }
  if (!recipe(run, "quant_recipe").empty())
    approx.push_back("per-module precisions of " + recipe(run, "quant_recipe") +
                     " not modelled (one recipe for every GEMM, the MTP block aside)");
  // Megatron-LM's --cpu-offloading-num-layers (the recipe's cpu_offloading_num_layers):
  // whole-layer offload through Transformer Engine, training.offload_layers.
  if (const std::string n = recipe(run, "cpu_offloading_num_layers"); !n.empty() && n != "0")
    y << "  offload_layers: " << n << "\n";
  if (run.fsdp > 0) y << "  fsdp: true\n";
  // The FSDP column is the sharding group (Megatron-Bridge 067f987d,
  // docs/performance-summary-archive.md: "sharding group size = #GPUs / (TP x PP)", the dp x
  // cp ranks); a smaller one is hybrid sharding over groups of that many.
  if (run.fsdp > 0 && run.tp * run.pp > 0 && run.fsdp < run.gpus / (run.tp * run.pp))
    y << "  fsdp_shard_group: " << run.fsdp << "\n";
  y << "  optimizer:\n";
  if (run.fsdp == 0) y << "    zero_stage: 1\n";
  // perf_recipes/_common.py: grad_reduce_in_fp32 False (bf16 gradient buffers); the base
  // recipes overlap the gradient reduce and the parameter gather.
  y << "    grad_dtype: bf16\n";
  if (run.fsdp == 0) y << "    overlap_grad_reduce: true\n    overlap_param_gather: true\n";

  // ---- MoE --------------------------------------------------------------------------------
  if (is_moe(run)) {
    // Megatron-Bridge's apply_flex_dispatcher_backend turns the flex dispatcher on for a
    // recipe that names a flex backend.
    const std::string backend = recipe(run, "moe_flex_backend");
    const std::string dispatcher = backend.empty() ? recipe(run, "moe_dispatcher") : "flex";
    if (dispatcher == "flex" && run.ep > 1) {
      y << "  moe_dispatcher: deepep\n";
      if (backend != "deepep") approx.push_back("flex dispatcher " + backend + " taken as deepep");
    }
    if (recipe(run, "moe_ep_overlap") == "True" && run.ep > 1) y << "  moe_overlap: true\n";
  }
  // CUDA graphs: Megatron's full_iteration graph (cuda_graph_impl full_iteration, or the
  // local implementation with the full_iteration scope) captures every kernel; the
  // transformer_engine implementation captures the scopes its list names. "none" is none,
  // whatever the scope says.
  const std::string graphs = recipe(run, "cuda_graph_impl");
  const std::string scope = recipe(run, "cuda_graph_scope");
  std::string scopes;
  if (graphs == "full_iteration" ||
      (graphs == "local" && scope.find("full_iteration") != std::string::npos)) {
    scopes = "full_iteration";
  } else if (graphs == "transformer_engine" || graphs == "local") {
    for (const char* name : {"attn", "mlp", "moe_router", "moe_preprocess", "moe", "mamba"}) {
      const std::string quoted = std::string("\"") + name + "\"";
      if (scope.find(quoted) != std::string::npos)
        scopes += (scopes.empty() ? "" : ",") + std::string(name);
    }
  }
  if (!scopes.empty()) y << "  cuda_graphs: " << scopes << "\n";
  out.yaml = y.str();
  return out;
}

double RowResult::time_error() const {
  if (!predicted_tokens_per_s_per_gpu) return 0.0;
  return published_tokens_per_s_per_gpu / *predicted_tokens_per_s_per_gpu - 1.0;
}

RowResult evaluate(const PublishedRun& run, const std::string& source_dir,
                   const std::vector<std::string>& device_keys) {
  RowResult r;
  r.id = run.id;
  r.group = group_of(run);
  r.published_tokens_per_s_per_gpu = run.tokens_per_s_per_gpu;
  try {
    const Expressed e = express(run, source_dir, device_keys);
    r.approximations = e.approximations;
    const Config config = parse_config(e.yaml, run.id + ".yaml");
    const auto experiment = prepare(config);
    const Schedule schedule = make_schedule(*experiment);
    const Plan plan = config_plan(*experiment, schedule.num_stages);
    const SimResult sim = bmpipe::run(*experiment, plan, schedule);
    if (!sim.ok) {
      r.refused = "simulation failed: " + sim.error;
      return r;
    }
    r.fits = sim.fits;
    const double seconds = static_cast<double>(sim.iteration_time) * 1e-9;
    r.predicted_tokens_per_s_per_gpu =
        static_cast<double>(run.gbs) * run.seq / (seconds * run.gpus);
  } catch (const ConfigError& e) {
    r.refused = e.key() + ": " + e.message();
  } catch (const std::exception& e) {
    r.refused = e.what();
  }
  return r;
}

std::vector<GroupSummary> summarize(const std::vector<RowResult>& rows) {
  std::map<std::string, GroupSummary> groups;
  GroupSummary all{.group = "all"};
  for (const RowResult& r : rows) {
    for (GroupSummary* g : {&groups[r.group], &all}) {
      g->group = g == &all ? "all" : r.group;
      if (!r.predicted_tokens_per_s_per_gpu) {
        ++g->refused;
        continue;
      }
      const double e = r.time_error();
      ++g->rows;
      g->mean_abs_error += std::abs(e);
      g->mean_error += e;
      g->max_abs_error = std::max(g->max_abs_error, std::abs(e));
    }
  }
  std::vector<GroupSummary> out;
  for (auto& [name, g] : groups) out.push_back(g);
  out.push_back(all);
  for (GroupSummary& g : out)
    if (g.rows > 0) {
      g.mean_abs_error /= g.rows;
      g.mean_error /= g.rows;
    }
  return out;
}

std::string format_table(const std::vector<RowResult>& rows) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-42s %-28s %12s %12s %8s  %s\n", "run", "group", "published",
                "bmpipe", "time err", "notes");
  o << line;
  std::snprintf(line, sizeof line, "%-42s %-28s %12s %12s %8s\n", "", "", "tok/s/GPU", "tok/s/GPU",
                "%");
  o << line;
  for (const RowResult& r : rows) {
    if (r.predicted_tokens_per_s_per_gpu) {
      std::snprintf(line, sizeof line, "%-42s %-28s %12.0f %12.0f %+8.1f  %s\n", r.id.c_str(),
                    r.group.c_str(), r.published_tokens_per_s_per_gpu,
                    *r.predicted_tokens_per_s_per_gpu, 100 * r.time_error(),
                    r.fits ? "" : "(bmpipe: does not fit)");
    } else {
      std::snprintf(line, sizeof line, "%-42s %-28s %12.0f %12s %8s  not simulated: %.160s\n",
                    r.id.c_str(), r.group.c_str(), r.published_tokens_per_s_per_gpu, "-", "-",
                    r.refused.c_str());
    }
    o << line;
  }
  o << "\n";
  std::snprintf(line, sizeof line, "%-30s %5s %8s %10s %10s %10s\n", "group", "rows", "refused",
                "mean|err|%", "max|err|%", "mean err%");
  o << line;
  for (const GroupSummary& g : summarize(rows)) {
    std::snprintf(line, sizeof line, "%-30s %5d %8d %10.1f %10.1f %+10.1f\n", g.group.c_str(),
                  g.rows, g.refused, 100 * g.mean_abs_error, 100 * g.max_abs_error,
                  100 * g.mean_error);
    o << line;
  }
  o << "\ntime err: predicted / published iteration time - 1 (negative: bmpipe too fast)\n";
  return o.str();
}

namespace {

/// The sub-ops of moe_decoder_layer_cost that Megatron-Core's MoELayer runs: the router,
/// a latent MoE's projections, the dispatch, the experts, the combine and the shared expert
/// (no norm, no attention, no residual).
bool moe_layer_op(const std::string& name) {
  for (const char* prefix : {"router", "fc1_latent_proj", "fc2_latent_proj", "permute", "a2a-",
                             "etp-", "experts_", "unpermute", "shared_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

std::vector<MoeLayerRow> moe_layer_rows(const std::string& path,
                                        const std::vector<std::string>& device_keys) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the file");
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<MoeLayerRow> out;
  for (const auto& row : doc.at("rows")) {
    MoeLayerRow r;
    r.name = row.at("name").get<std::string>();
    const auto backend = row.at("flex_backend");
    r.dispatcher = backend.is_string() ? backend.get<std::string>() : "alltoall";
    r.precision = row.at("precision").get<std::string>().rfind("fp8", 0) == 0 ? "fp8" : "bf16";
    r.published_forward_ms = row.at("forward_ms").get<double>();
    r.published_backward_ms = row.at("backward_ms").get<double>();
    const auto& m = row.at("model");
    std::ostringstream y;
    y << "cluster:\n  nodes: 1\n  devices_per_node: 8\n  device:\n    preset: h100-sxm\n";
    for (const std::string& key : device_keys) y << "    " << key << "\n";
    // One layer; attention and the dense FFN do not enter the MoE sub-ops.
    y << "model:\n  architecture: llama\n  num_layers: 1\n  hidden_size: "
      << m.at("hidden_size").get<int>()
      << "\n  num_attention_heads: " << m.at("num_attention_heads").get<int>()
      << "\n  ffn_hidden_size: " << m.at("moe_ffn_hidden_size").get<int>()
      << "\n  vocab_size: 32000\n  moe:\n"
      << "    num_experts: " << m.at("num_experts").get<int>()
      << "\n    top_k: " << m.at("router_topk").get<int>()
      << "\n    expert_ffn_hidden_size: " << m.at("moe_ffn_hidden_size").get<int>()
      << "\n    load_imbalance: 1\n";
    if (const auto it = m.find("moe_shared_expert_intermediate_size");
        it != m.end() && it->is_number())
      y << "    shared_expert_ffn_hidden_size: " << it->get<int>() << "\n";
    if (const auto it = m.find("moe_router_num_groups"); it != m.end() && it->is_number())
      y << "    router_groups: " << it->get<int>()
        << "\n    router_group_top_k: " << m.at("moe_router_group_topk").get<int>() << "\n";
    y << "training:\n  pp: 1\n  tp: 1\n  ep: " << row.at("ep").get<int>()
      << "\n  seq_length: " << m.at("seq_length").get<int>()
      << "\n  micro_batch_size: " << m.at("micro_batch_size").get<int>()
      << "\n  global_batch_size: 8\n  kernels: fused\n";
    if (r.dispatcher != "alltoall") y << "  moe_dispatcher: deepep\n";
    if (r.precision == "fp8") y << "  fp8: e4m3\n  fp8_recipe: blockwise\n";
    try {
      const Config config = parse_config(y.str(), r.name + ".yaml");
      const LayerCost cost = moe_decoder_layer_cost(*config.model.shape, *config.device.hardware,
                                                    cost_settings(config));
      for (const SubOpCost& op : cost.ops)
        if (moe_layer_op(op.name)) {
          r.forward_ms += 1e3 * op.forward_s;
          r.backward_ms += 1e3 * (op.backward_input_s + op.backward_weight_s);
        }
    } catch (const ConfigError& e) {
      r.refused = e.key() + ": " + e.message();
    } catch (const std::exception& e) {
      r.refused = e.what();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string format_moe_layer_table(const std::vector<MoeLayerRow>& rows) {
  std::ostringstream o;
  char line[400];
  std::snprintf(line, sizeof line, "%-30s %-9s %-5s %9s %9s %7s %9s %9s %7s\n", "MoE layer (H100)",
                "dispatch", "prec", "F pub ms", "F bmpipe", "err %", "B pub ms", "B bmpipe",
                "err %");
  o << line;
  double sum_f = 0, sum_b = 0, max_f = 0, max_b = 0;
  int n = 0;
  for (const MoeLayerRow& r : rows) {
    if (!r.refused.empty()) {
      o << r.name << ": not costed: " << r.refused << "\n";
      continue;
    }
    const double ef = r.forward_ms / r.published_forward_ms - 1;
    const double eb = r.backward_ms / r.published_backward_ms - 1;
    std::snprintf(line, sizeof line, "%-30s %-9s %-5s %9.3f %9.3f %+7.1f %9.3f %9.3f %+7.1f\n",
                  r.name.c_str(), r.dispatcher.c_str(), r.precision.c_str(), r.published_forward_ms,
                  r.forward_ms, 100 * ef, r.published_backward_ms, r.backward_ms, 100 * eb);
    o << line;
    sum_f += std::abs(ef);
    sum_b += std::abs(eb);
    max_f = std::max(max_f, std::abs(ef));
    max_b = std::max(max_b, std::abs(eb));
    ++n;
  }
  if (n > 0) {
    std::snprintf(line, sizeof line,
                  "forward mean |err| %.1f %% (max %.1f %%), backward mean |err| %.1f %% (max "
                  "%.1f %%), %d rows\n",
                  100 * sum_f / n, 100 * max_f, 100 * sum_b / n, 100 * max_b, n);
    o << line;
  }
  return o.str();
}

}  // namespace bmpipe::fidelity
