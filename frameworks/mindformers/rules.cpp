// MindFormers' rules. Sources: mindspore-lab/mindformers at fd4deebc1 (as
// frameworks/mindformers/import.cpp cites it; a feature card it no longer holds at
// 6be67890, its last commit with the card) and MindSpore's docs at 156e3e403eb9 (read there
// with git show: the commit "modify swap doc", 2025-04-16).
#include "frameworks/mindformers/rules.hpp"

#include <array>

#include "sim/offload.hpp"

namespace bmpipe {

namespace {

using Breach = std::optional<RuleBreach>;

// MindSpore docs, "Fine-Grained Activations SWAP" (mindspore-ai/docs 156e3e403eb9,
// docs/mindformers/docs/source_en/function/fine_grained_activations_swap.md:18, under
// "Constraint Scenarios"; published as
// https://www.mindspore.cn/mindformers/docs/en/r1.5.0/function/fine_grained_activations_swap.html):
// "Compatible with LLama-family dense models, MoE sparse models to be supported in future
// updates". It is the docs' word only: mindspore-lab/mindformers at fd4deebc1 asserts nothing
// of the kind (mindformers/tools/check_rules.py checks only swap_config's types).
Breach swap_dense_only(const Config& c) {
  if (parse_offload_modules(c.training.offload_modules, nullptr) == 0 || !c.model.shape ||
      !(c.model.shape->is_moe() || c.model.shape->is_mla()))
    return std::nullopt;
  return RuleBreach{"training.offload_modules",
                    "MindFormers' swap_config cannot state training.offload_modules here: its "
                    "fine-grained activation swap supports Llama-family dense models only "
                    "(\"Compatible with LLama-family dense models, MoE sparse models to be "
                    "supported in future updates\", MindSpore's docs)"};
}

// mindformers/core/parallel_config.py:63-66, build_parallel_config: with pipeline stages,
//   logger.info("pipeline_stage = %s > 1, vocab_emd_dp will be reset to False.", ...)
//   config.parallel_config.vocab_emb_dp = False
// (frameworks/mindformers/import.cpp, read_vocab_emb_dp): the embedding is split over
// model_parallel whatever the YAML says.
Breach vocab_emb_dp_pipeline(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.vocab_parallel || t.tp <= 1 || t.pp <= 1) return std::nullopt;
  return RuleBreach{"training.vocab_parallel",
                    "MindFormers' keys cannot state training.vocab_parallel: false with pp > 1: "
                    "it resets parallel_config.vocab_emb_dp to False when pipeline_stage > 1 "
                    "(\"vocab_emd_dp will be reset to False\")"};
}

// docs/feature_cards/Offset_Recompute.md:14 (mindspore-lab/mindformers at 6be67890, the
// card's last commit: c5cc799e3 deleted it, before fd4deebc1), in Chinese: pp-interleave
// "只在pipeline stage >1 ... 的场景下 ... 有效果" ("has an effect only where pipeline stage
// > 1"): pp_interleave_num at pipeline_stage 1 states no interleaving.
Breach interleave_pipeline(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.vpp <= 1 || t.pp > 1) return std::nullopt;
  return RuleBreach{"training.vpp", "vpp = " + std::to_string(t.vpp) +
                                        " at pp 1: MindFormers' pp_interleave_num needs "
                                        "parallel_config.pipeline_stage > 1 (pp-interleave "
                                        "\"has an effect only where pipeline stage > 1\", its "
                                        "feature card; expected vpp 1)"};
}

constexpr std::string_view kMindFormers = "MindFormers";

const std::array kRules = {
    FrameworkRule{"mindformers.swap-dense-only", kMindFormers, "training.offload_modules",
                  "\"Compatible with LLama-family dense models, MoE sparse models to be supported "
                  "in future updates\" (the docs' constraint for swap_config; no assertion)",
                  "mindspore-ai/docs 156e3e403eb9 docs/mindformers/docs/source_en/function/"
                  "fine_grained_activations_swap.md:18, \"Constraint Scenarios\" "
                  "(https://www.mindspore.cn/mindformers/docs/en/r1.5.0/function/"
                  "fine_grained_activations_swap.html)",
                  swap_dense_only},
    FrameworkRule{"mindformers.vocab-emb-dp-pipeline", kMindFormers, "training.vocab_parallel",
                  "\"vocab_emd_dp will be reset to False\" when pipeline_stage > 1",
                  "mindspore-lab/mindformers fd4deebc1 mindformers/core/parallel_config.py:63-66, "
                  "build_parallel_config",
                  vocab_emb_dp_pipeline},
    FrameworkRule{"mindformers.interleave-pipeline", kMindFormers, "training.vpp",
                  "pp-interleave \"has an effect only where pipeline stage > 1\" (the feature "
                  "card's words, translated from Chinese)",
                  "mindspore-lab/mindformers 6be67890 docs/feature_cards/Offset_Recompute.md:14 "
                  "(deleted by c5cc799e3, before fd4deebc1)",
                  interleave_pipeline},
};

}  // namespace

std::span<const FrameworkRule> mindformers_rules() {
  return kRules;
}

}  // namespace bmpipe
