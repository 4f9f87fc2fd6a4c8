// bmpipe cost CONFIG [--json]: the analytic cost model's per-layer table for a config.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "api/api.hpp"
#include "api/summary.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "experiment/experiment.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

std::string mib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

}  // namespace

int run_cost(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe cost CONFIG [options]\n\nOptions");
  add_config_options(opts);
  // clang-format off
  opts.add_options()
      ("json", po::bool_switch(), "print JSON on stdout instead of a table")
      ("ops", po::bool_switch(), "also break every layer down into its sub-ops");
  // clang-format on
  add_override_options(opts, "chunks per device, overriding training.vpp");
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "cost", args, opts,
          "Per-layer forward, input-grad and weight-grad time, activation bytes per\n"
          "recompute mode, recompute cost and parameters of one device (its tp share),\n"
          "for one micro-batch; then static bytes per stage.\n"
          "Exit codes: 0 success, 2 bad input.\n",
          vm))
    return *stop;
  const bool json = vm["json"].as<bool>(), with_ops = vm["ops"].as<bool>();
  return guarded("cost", [&] {
    const Config config = load_config(vm["config"].as<std::string>(), overrides_from(vm));
    // parse -> prepare -> run (assemble the config's plan) -> print
    const api::CostOutcome cost = api::run_cost(config, with_ops);
    if (json) {
      std::cout << json_text(cost.summary) << "\n";
      return 0;
    }
    const Experiment& experiment = *cost.experiment;
    const AnalyticCosts& a = *experiment.analytic;
    const Schedule& schedule = cost.schedule;
    const std::vector<std::int64_t>& stage_static = cost.stage_static_bytes;
    const std::vector<double>& tail_ms = cost.tail_ms;
    const LayerCost& head = a.head_for(schedule.num_stages);
    const std::vector<int>& counts = cost.plan.partition;
    const ModelShape& m = *config.model.shape;

    std::printf("bmpipe cost %s\n", config.file.c_str());
    std::printf("model %s (%s, %d layers, h %d, %d heads / %d kv, ffn %d, vocab %d)\n",
                config.model.name.c_str(), to_string(m.architecture).c_str(), m.num_layers,
                m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.ffn_hidden_size,
                m.vocab_size);
    std::printf("device %s   seq %d   micro-batch %d   tp %d%s   dp %d\n", a.hardware.name.c_str(),
                a.settings.seq_length, a.settings.micro_batch_size, a.settings.tp,
                !a.settings.sequence_parallel ? ""
                : a.settings.tp_comm_overlap  ? " (sequence parallel, collectives overlapped)"
                                              : " (sequence parallel)",
                a.dp);
    // Which kernels the llama layers' memory-bound sub-ops are costed with (training.kernels).
    if (m.architecture == Architecture::llama)
      std::printf("kernels %s\n", a.settings.kernels == Kernels::fused
                                      ? "fused (Megatron-Core / TransformerEngine)"
                                      : "eager (HF transformers; training.kernels: fused for "
                                        "Megatron-Core's)");
    if (m.is_moe()) {
      std::printf(
          "experts %d (top %d, ffn %d, shared ffn %d%s)   ep %d   etp %d   edp %d\n",
          m.moe.num_experts, m.moe.top_k, m.moe.expert_ffn, m.moe.shared_ffn,
          m.moe.latent_size > 0 ? (", latent " + std::to_string(m.moe.latent_size)).c_str() : "",
          a.settings.ep, a.settings.etp, a.edp);
      // Where DeepEP sends a token (training.moe_dispatcher: deepep; deepep_fanout).
      if (a.settings.moe_dispatcher == MoeDispatcher::deepep && a.settings.ep > 1) {
        const DeepEpFanout f = deepep_fanout(m.moe, a.settings.ep, a.settings.ep_per_domain);
        std::printf("dispatch deepep: a token reaches %.2f of %g nodes and %.2f devices\n", f.nodes,
                    static_cast<double>(a.settings.ep) / a.settings.ep_per_domain, f.ranks);
      }
    }
    // DeepSeek sparse attention (model.dsa): the share of the causal pairs its core keeps.
    if (m.is_dsa()) {
      const double s = a.settings.seq_length, k = std::min<double>(m.dsa.index_topk, s);
      std::printf(
          "sparse attention: indexer %d heads of %d, top %d keys: the core keeps %.1f %% "
          "of the causal pairs; indexer %s\n",
          m.dsa.index_heads, m.dsa.index_head_dim, m.dsa.index_topk,
          100 * causal_attention_pairs(s, k) / causal_attention_pairs(s, 0),
          m.dsa.indexer_loss ? "trained (its KL loss)" : "frozen");
    }
    std::printf("per micro-batch, per device (ms; activations in MiB):\n\n");
    // Activations per mode, then the recompute time of each mode that recomputes.
    std::printf("%-10s %5s %9s %9s %9s", "layer", "count", "F", "I", "W");
    for (Recompute r : kAllRecompute)
      std::printf(" %10s", ("act " + std::string(recompute_column(r))).c_str());
    for (Recompute r : kRecomputingModes)
      std::printf(" %9s", ("rc " + std::string(recompute_column(r))).c_str());
    std::printf(" %13s\n", "params");
    auto row = [&](const LayerCost& c, int count) {
      std::printf("%-10s %5d %9.3f %9.3f %9.3f", c.name.c_str(), count, c.forward_s * 1e3,
                  c.backward_input_s * 1e3, c.backward_weight_s * 1e3);
      for (Recompute r : kAllRecompute) std::printf(" %10s", mib(c.activation_bytes[r]).c_str());
      for (Recompute r : kRecomputingModes) std::printf(" %9.3f", c.recompute_extra_s[r] * 1e3);
      std::printf(" %13lld\n", static_cast<long long>(c.param_count));
      if (with_ops)
        for (const auto& op : c.ops)
          std::printf("  %-18s %9.3f %9.3f %9.3f  %s\n", op.name.c_str(), op.forward_s * 1e3,
                      op.backward_input_s * 1e3, op.backward_weight_s * 1e3,
                      kernel_class_name(op.kind));
    };
    row(a.embedding, 1);
    for (const auto& [kind, count] : a.layer_kinds(m)) row(*kind, count);
    if (a.mtp) row(*a.mtp, m.mtp_layers);
    row(head, 1);
    std::printf("\n%5s %7s %14s %12s %12s %12s %14s\n", "stage", "layers", "static", "weights",
                "grads", "optimizer", "dp+optimizer");
    for (int s = 0; s < schedule.num_stages; ++s) {
      const api::CostOutcome::StaticBreakdown& b = cost.stage_static_parts[s];
      std::printf("%5d %7d %14s %12s %12s %12s %11.3f ms\n", s, counts[s],
                  format_gib(stage_static[s]).c_str(), format_gib(b.weights).c_str(),
                  format_gib(b.grads).c_str(), format_gib(b.optimizer).c_str(),
                  tail_ms[schedule.stage_rank[s]]);
    }
    std::printf("(static = weights + gradients + optimizer state%s; plus %s reserved per device)\n",
                a.settings.fp8 != Fp8::none ? " + FP8 weight copies" : "",
                format_gib(experiment.reserved_bytes).c_str());
    return 0;
  });
}

}  // namespace bmpipe::cli
