// torchtitan's rules. Sources: pytorch/torchtitan at v0.2.2 (73a0e6979dd1), as
// frameworks/torchtitan/import.cpp cites it, and at the config registry's commit
// (frameworks/torchtitan/registry.hpp, kTorchTitanRegistryCommit) for the 2026 trainer.
#include "frameworks/torchtitan/rules.hpp"

#include <array>

namespace bmpipe {

namespace {

using Breach = std::optional<RuleBreach>;

// torchtitan/distributed/parallel_dims.py:58-59, ParallelDims._validate:
//   if ep > 1:
//       assert etp == tp or etp == 1, "Currently we only support ETP=TP or ETP=1"
// (bmpipe holds every MoE job to it, as its exporter always has.)
Breach etp_one_or_tp(const Config& c) {
  const TrainingConfig& t = c.training;
  if (!c.model.shape || !c.model.shape->is_moe() || t.etp == 1 || t.etp == t.tp)
    return std::nullopt;
  return RuleBreach{"training.etp",
                    "torchtitan's expert_tensor_parallel_degree is 1 or "
                    "tensor_parallel_degree, not " +
                        std::to_string(t.etp)};
}

// torchtitan/distributed/tensor_parallel.py:20-23, maybe_enable_async_tp: "Async TP requires
// 'model' in --compile.components and --compile.enable". bmpipe reads compiled layers as
// fused kernels (frameworks/torchtitan/import.cpp [TT-atp]).
Breach async_tp_compile(const Config& c) {
  const TrainingConfig& t = c.training;
  if (!t.tp_comm_overlap || t.kernel_set() == Kernels::fused) return std::nullopt;
  return RuleBreach{"training.tp_comm_overlap",
                    "true is torchtitan's async TP, which it refuses without compile (\"Async "
                    "TP requires 'model' in --compile.components and --compile.enable\"; "
                    "expected training.kernels: fused, or tp_comm_overlap: false)"};
}

// torchtitan/trainer.py:168-199, _validate_cuda_graphs (the registry's trainer): the step captured
// as one CUDA graph refuses pipeline parallelism ("CUDA graphs do not support pipeline
// parallelism yet") and expert parallelism with the standard token dispatcher ("CUDA graphs
// support only expert parallel token dispatcher configurations without CPU
// synchronization").
Breach cuda_graphs(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.cuda_graphs != "full_iteration") return std::nullopt;
  if (t.pp > 1)
    return RuleBreach{"training.cuda_graphs",
                      "full_iteration with pp = " + std::to_string(t.pp) +
                          ": torchtitan refuses it (\"CUDA graphs do not support pipeline "
                          "parallelism yet\"; expected cuda_graphs: none, or pp 1)"};
  if (t.ep > 1 && t.moe_dispatcher != "deepep")
    return RuleBreach{"training.cuda_graphs",
                      "full_iteration with ep = " + std::to_string(t.ep) + " and the " +
                          t.moe_dispatcher +
                          " dispatcher: torchtitan refuses it (\"CUDA graphs support only expert "
                          "parallel token dispatcher configurations without CPU "
                          "synchronization\"; expected cuda_graphs: none, or "
                          "moe_dispatcher: deepep)"};
  return std::nullopt;
}

constexpr std::string_view kTorchTitan = "torchtitan";

const std::array kRules = {
    FrameworkRule{"torchtitan.etp-one-or-tp", kTorchTitan, "training.etp",
                  "\"Currently we only support ETP=TP or ETP=1\"",
                  "pytorch/torchtitan v0.2.2 (73a0e6979dd1) torchtitan/distributed/"
                  "parallel_dims.py:58-59, ParallelDims._validate",
                  etp_one_or_tp},
    FrameworkRule{"torchtitan.async-tp-compile", kTorchTitan, "training.tp_comm_overlap",
                  "\"Async TP requires 'model' in --compile.components and --compile.enable\"",
                  "pytorch/torchtitan v0.2.2 (73a0e6979dd1) torchtitan/distributed/"
                  "tensor_parallel.py:20-23, maybe_enable_async_tp",
                  async_tp_compile, /*export_restates=*/true},
    FrameworkRule{"torchtitan.cuda-graphs", kTorchTitan, "training.cuda_graphs",
                  "\"CUDA graphs do not support pipeline parallelism yet\"; \"CUDA graphs "
                  "support only expert parallel token dispatcher configurations without CPU "
                  "synchronization\"",
                  "pytorch/torchtitan b5bcd76c66d0 torchtitan/trainer.py:168-199, "
                  "_validate_cuda_graphs",
                  cuda_graphs, /*export_restates=*/true},
};

}  // namespace

std::span<const FrameworkRule> torchtitan_rules() {
  return kRules;
}

}  // namespace bmpipe
