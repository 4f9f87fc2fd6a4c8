// bmpipe-fidelity: the published runs of bench/fidelity/megatron_bridge_runs.json, each
// written down as a config and simulated, against their published throughput.
//
//   bmpipe-fidelity [--runs FILE] [--source-dir DIR] [--only SUBSTRING,...] [--config ID]
//                   [--moe-layers] [--device KEY=VALUE]... [--json]
//
// --moe-layers prints Megatron-LM's MoE-layer CI alone (H100).
//
// --config ID prints the config a run is written as (to run it with `bmpipe simulate`).
// --device puts `KEY: VALUE` beside every run's device preset (to try a constant).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/fidelity/fidelity.hpp"

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "bmpipe-fidelity: %s\nusage: bmpipe-fidelity [--runs FILE] [--source-dir DIR] "
               "[--only SUBSTRING,...] [--config ID] [--moe-layers] [--device KEY=VALUE]... "
               "[--json]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace bmpipe::fidelity;
  std::string source_dir = BMPIPE_SOURCE_DIR;
  std::string runs_path;
  std::string only, config_id;
  std::vector<std::string> device_keys;
  bool json = false, moe_layers_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--json") {
      json = true;
    } else if (a == "--moe-layers") {
      moe_layers_only = true;
    } else if (a == "--runs" || a == "--source-dir" || a == "--only" || a == "--config" ||
               a == "--device") {
      const char* v = value();
      if (!v) return usage((a + " needs a value").c_str());
      if (a == "--runs") runs_path = v;
      if (a == "--source-dir") source_dir = v;
      if (a == "--only") only = v;
      if (a == "--config") config_id = v;
      if (a == "--device") {
        std::string kv = v;
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          return usage(("--device " + kv + ": expected KEY=VALUE").c_str());
        device_keys.push_back(kv.substr(0, eq) + ": " + kv.substr(eq + 1));
      }
    } else if (a == "--help" || a == "-h") {
      usage("the published runs against bmpipe's simulation of each");
      return 0;
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (runs_path.empty()) runs_path = source_dir + "/bench/fidelity/megatron_bridge_runs.json";
  try {
    const std::vector<PublishedRun> runs = load_runs(runs_path);
    if (!config_id.empty()) {
      for (const PublishedRun& run : runs)
        if (run.id == config_id) {
          const Expressed e = express(run, source_dir, device_keys);
          std::cout << e.yaml;
          for (const std::string& note : e.approximations)
            std::cout << "# approximation: " << note << "\n";
          return 0;
        }
      return usage(("no run " + config_id).c_str());
    }
    if (moe_layers_only) {  // the MoE-layer CI alone
      const auto layers =
          moe_layer_rows(source_dir + "/bench/fidelity/megatron_moe_layer_ci.json", device_keys);
      if (!json) {
        std::cout << format_moe_layer_table(layers);
        return 0;
      }
      nlohmann::json out = nlohmann::json::array();
      for (const MoeLayerRow& r : layers)
        out.push_back({{"name", r.name},
                       {"forward_error", r.forward_ms / r.published_forward_ms - 1},
                       {"backward_error", r.backward_ms / r.published_backward_ms - 1}});
      std::cout << out.dump(1) << "\n";
      return 0;
    }
    std::vector<RowResult> rows;
    for (const PublishedRun& run : runs) {
      if (!only.empty()) {  // comma-separated substrings, any of which selects a run
        bool hit = false;
        for (std::size_t at = 0; at <= only.size();) {
          const std::size_t comma = std::min(only.find(',', at), only.size());
          const std::string part = only.substr(at, comma - at);
          hit = hit || (!part.empty() && run.id.find(part) != std::string::npos);
          at = comma + 1;
        }
        if (!hit) continue;
      }
      rows.push_back(evaluate(run, source_dir, device_keys));
      if (!json) std::fprintf(stderr, "\r%zu runs simulated", rows.size());
    }
    if (!json) std::fprintf(stderr, "\n");
    if (!json && only.empty())
      std::cout << format_moe_layer_table(moe_layer_rows(
                       source_dir + "/bench/fidelity/megatron_moe_layer_ci.json", device_keys))
                << "\n";
    if (json) {
      nlohmann::json out = nlohmann::json::array();
      for (const RowResult& r : rows) {
        nlohmann::json j = {{"id", r.id},
                            {"group", r.group},
                            {"published_tokens_per_s_per_gpu", r.published_tokens_per_s_per_gpu},
                            {"fits", r.fits},
                            {"approximations", r.approximations}};
        if (r.predicted_tokens_per_s_per_gpu) {
          j["predicted_tokens_per_s_per_gpu"] = *r.predicted_tokens_per_s_per_gpu;
          j["time_error"] = r.time_error();
        } else {
          j["refused"] = r.refused;
        }
        out.push_back(j);
      }
      std::cout << out.dump(1) << "\n";
    } else {
      std::cout << format_table(rows);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bmpipe-fidelity: %s\n", e.what());
    return 1;
  }
  return 0;
}
