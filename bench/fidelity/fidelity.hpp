#pragma once
/// \file
/// The fidelity table: published training runs, each written down as a bmpipe config,
/// simulated, and set beside its published throughput. Every cost-model change is judged by
/// it (`bmpipe_fidelity`, docs/cost-model.md "Fidelity on published runs").
///
/// The runs are bench/fidelity/megatron_bridge_runs.json (written by
/// extract_megatron_bridge.py from Megatron-Bridge's performance tables and perf recipes at
/// 067f987d; that script's docstring says which rows and why). A row is written down from
/// its own layout (the table's tp, pp, cp, vp, ep, FSDP, batch and sequence) and from its
/// recipe's other settings (recompute, dispatcher, CUDA graphs, tp overlap), with the
/// approximations each row needed listed beside it.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bmpipe::fidelity {

/// One published run, as the JSON file holds it.
struct PublishedRun {
  std::string id;  ///< family_phase_Ngpu_gpu_precision
  /// llama3_8b, llama3_70b, llama31_405b, deepseek_v3, kimi_k2, gpt_oss_120b,
  /// nemotron_3_nano, nemotron_3_super, nemotron_3_5_lightning
  std::string family;
  std::string model;      ///< the table's model label ("DeepSeekV3 (w/o MTP)")
  std::string system;     ///< DGX-H100, DGX-B200, DGX-B300, DGX-GB200, DGX-GB300
  std::string release;    ///< Megatron-Bridge release of the figure
  std::string phase;      ///< pretrain or sft
  std::string precision;  ///< recipe suffix: bf16, fp8cs, fp8mx, nvfp4
  std::string source;     ///< repository@commit file:line of the table row
  int gpus = 0, gbs = 0, mbs = 0, seq = 0, tp = 1, pp = 1, cp = 1, vp = 1, ep = 1, fsdp = 0;
  double tokens_per_s_per_gpu = 0;
  std::map<std::string, std::string> recipe;  ///< the perf recipe's extracted settings
};

/// Reads megatron_bridge_runs.json. Throws std::runtime_error naming the file and row.
std::vector<PublishedRun> load_runs(const std::string& path);

/// A run written down as a config.
struct Expressed {
  std::string yaml;  ///< the config text (empty when refused)
  /// What the config leaves out or approximates, one short phrase each.
  std::vector<std::string> approximations;
};

/// `run` as a config. `source_dir`: the repository root (for the HF config files).
/// `device_keys`: extra `key: value` lines put beside the device preset (for fits).
Expressed express(const PublishedRun& run, const std::string& source_dir,
                  const std::vector<std::string>& device_keys = {});

/// The group a run is summarized in: generation (hopper, blackwell, blackwell-ultra) x
/// dense or moe x precision.
std::string group_of(const PublishedRun& run);

struct RowResult {
  std::string id;
  std::string group;
  double published_tokens_per_s_per_gpu = 0;
  /// Unset when the run could not be written down or simulated (`refused` says why).
  std::optional<double> predicted_tokens_per_s_per_gpu;
  std::string refused;
  bool fits = true;  ///< bmpipe's memory check (the time is reported either way)
  std::vector<std::string> approximations;
  /// predicted iteration time / published iteration time - 1 (negative: bmpipe fast).
  double time_error() const;
};

/// Simulates `run` as `express` writes it.
RowResult evaluate(const PublishedRun& run, const std::string& source_dir,
                   const std::vector<std::string>& device_keys = {});

struct GroupSummary {
  std::string group;
  int rows = 0;     ///< simulated
  int refused = 0;  ///< not expressible or failed
  double mean_abs_error = 0;
  double max_abs_error = 0;
  double mean_error = 0;  ///< signed: the direction
};

/// Per group, then "all" last.
std::vector<GroupSummary> summarize(const std::vector<RowResult>& rows);

/// The table as text: one line per row, then the group summaries.
std::string format_table(const std::vector<RowResult>& rows);

// ---- one MoE layer ------------------------------------------------------------------------

/// One row of bench/fidelity/megatron_moe_layer_ci.json (Megatron-LM's MoE performance CI,
/// d98e8a64: one MoELayer, no attention, ep 8 on 8 H100, seq 4096, micro-batch 1,
/// force-balanced) against the MoE sub-ops of bmpipe's moe_decoder_layer_cost.
struct MoeLayerRow {
  std::string name;
  std::string dispatcher;  ///< alltoall, deepep, hybridep (costed as deepep)
  std::string precision;   ///< bf16 or fp8 (blockwise)
  double published_forward_ms = 0, published_backward_ms = 0;
  double forward_ms = 0, backward_ms = 0;  ///< bmpipe: router .. unpermute + shared expert
  std::string refused;
};

/// Every row of the file, each costed. `device_keys` as express().
std::vector<MoeLayerRow> moe_layer_rows(const std::string& path,
                                        const std::vector<std::string>& device_keys = {});

/// The MoE layer rows as text, with the mean and max |error| of forward and backward.
std::string format_moe_layer_table(const std::vector<MoeLayerRow>& rows);

}  // namespace bmpipe::fidelity
