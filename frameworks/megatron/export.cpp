#include "frameworks/megatron/export.hpp"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "frameworks/common/formats.hpp"

// Sources (read, not copied), cited below by these short names:
//  [MF-card]   MindFormers, docs/feature_cards/Offset_Recompute.md ("流水并行的负载偏置与重计算"),
//              github.com/mindspore-lab/mindformers at f1e33c5629d5.
//  [MF-docs]   MindFormers docs, "Memory Optimization" > Recomputation
//              (www.mindspore.cn/mindformers/docs/en/master/feature/memory_optimization.html).
//  [MF-code]   MindFormers, mindformers/models/utils.py and
//              mindformers/parallel_core/training_graph/transformer/utils.py, class
//              LayerSetting, at fd4deebc1 (dev branch).
//  [MG-layout] Megatron-LM, docs/user-guide/features/pipeline_parallel_layout.md and
//              megatron/core/transformer/pipeline_parallel_layer_layout.py, at d98e8a64ddf3.
//  [MG-args]   Megatron-LM, megatron/training/arguments.py (validate_args), same commit.
//  [MG-config] Megatron-LM, megatron/core/transformer/transformer_config.py (__post_init__
//              and the recompute_* field docs), same commit.
//  [MG-block]  Megatron-LM, megatron/core/transformer/transformer_block.py
//              (get_num_layers_to_build) and megatron/core/recompute.py (checkpointed
//              forward), same commit.

namespace bmpipe {

namespace {

int num_stages(const ExportLayout& l) {
  return l.pp * l.vpp;
}

void check_layout(const ExportLayout& l) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("export: " + what); };
  if (l.pp < 1) fail("pp must be at least 1, got " + std::to_string(l.pp));
  if (l.vpp < 1) fail("vpp must be at least 1, got " + std::to_string(l.vpp));
  // Both frameworks interleave only across pipeline ranks ([MF-card]: pp-interleave works
  // only with pipeline_stage > 1; [MG-block]: chunks are split only when pp > 1).
  if (l.vpp > 1 && l.pp == 1) fail("vpp > 1 needs pp > 1: there is no pipeline to interleave");
  const auto stages = static_cast<std::size_t>(num_stages(l));
  if (l.partition.size() != stages)
    fail("partition has " + std::to_string(l.partition.size()) +
         " entries, expected pp*vpp = " + std::to_string(stages));
  if (l.stage_rank.size() != stages)
    fail("stage_rank has " + std::to_string(l.stage_rank.size()) +
         " entries, expected pp*vpp = " + std::to_string(stages));
  std::vector<int> held(l.pp, 0);
  for (std::size_t s = 0; s < stages; ++s) {
    const int r = l.stage_rank[s];
    if (r < 0 || r >= l.pp)
      fail("stage_rank[" + std::to_string(s) + "] = " + std::to_string(r) + " is not in [0, " +
           std::to_string(l.pp) + ")");
    ++held[r];
  }
  for (int r = 0; r < l.pp; ++r)
    if (held[r] != l.vpp)
      fail("rank " + std::to_string(r) + " holds " + std::to_string(held[r]) +
           " stages, expected vpp = " + std::to_string(l.vpp));
  long long total = 0;
  for (std::size_t s = 0; s < stages; ++s) {
    if (l.partition[s] < 0)
      fail("partition[" + std::to_string(s) + "] = " + std::to_string(l.partition[s]) +
           " is negative");
    total += l.partition[s];
  }
  if (total != static_cast<long long>(l.recompute.size()))
    fail("partition adds up to " + std::to_string(total) + " layers but recompute lists " +
         std::to_string(l.recompute.size()));
  if (l.recompute.empty()) fail("the model has no decoder layer");
}

/// Stage s runs on rank s mod pp: one stage per rank, or Megatron-style interleaving.
bool interleaved_placement(const ExportLayout& l) {
  for (int s = 0; s < num_stages(l); ++s)
    if (l.stage_rank[s] != s % l.pp) return false;
  return true;
}

std::string stage_list(const std::vector<int>& stages) {
  std::string out;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    if (i > 0) out += (i + 1 == stages.size()) ? " and " : ", ";
    out += std::to_string(stages[i]);
  }
  return out;
}

// ---- Megatron-LM partition ---------------------------------------------------------------

/// The partition flags, simplest first: none (Megatron's even split), first and/or last
/// rank uneven, or the explicit layout, which expresses any partition under interleaved
/// placement.
std::vector<std::string> megatron_partition_flags(const ExportLayout& l) {
  const int layers = static_cast<int>(l.recompute.size());
  std::vector<std::string> flags;
  // [MG-args]: at most one of --num-layers-per-virtual-pipeline-stage,
  // --num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout; with the
  // layout, vpp is the number of stages / pp. Uneven first/last with vpp needs
  // --num-virtual-stages-per-pipeline-rank (the other vpp flag is refused with them).
  const std::string vpp_flag = "--num-virtual-stages-per-pipeline-rank " + std::to_string(l.vpp);
  const bool even = std::all_of(l.partition.begin(), l.partition.end(),
                                [&](int n) { return n == l.partition.front(); });
  if (even) {
    if (l.vpp > 1) flags.push_back(vpp_flag);
    return flags;
  }
  if (l.pp >= 2) {
    const int first_total = l.partition.front() * l.vpp;
    const int last_total = l.partition[l.pp - 1] * l.vpp;
    struct Candidate {
      std::optional<int> first, last;
    };
    const Candidate candidates[] = {
        {first_total, std::nullopt}, {std::nullopt, last_total}, {first_total, last_total}};
    for (const Candidate& c : candidates) {
      const auto built = megatron_uneven(layers, l.pp, l.vpp, c.first, c.last);
      if (!built || *built != l.partition) continue;
      if (l.vpp > 1) flags.push_back(vpp_flag);
      if (c.first)
        flags.push_back("--decoder-first-pipeline-num-layers " + std::to_string(*c.first));
      if (c.last) flags.push_back("--decoder-last-pipeline-num-layers " + std::to_string(*c.last));
      return flags;
    }
  }
  // Quoted: '|' and '*' are shell metacharacters ([MG-layout] quotes it the same way).
  flags.push_back("--pipeline-model-parallel-layout \"" + megatron_layout_string(l.partition) +
                  "\"");
  return flags;
}

}  // namespace

// ---- MindFormers -------------------------------------------------------------------------

std::string export_mindformers(const ExportLayout& layout, std::vector<std::string>* notes) {
  check_layout(layout);
  std::vector<std::string> said;
  const int pp = layout.pp;
  const int vpp = layout.vpp;
  const int stages = num_stages(layout);
  const int layers = static_cast<int>(layout.recompute.size());
  const std::vector<int> starts = stage_starts(layout.partition);

  // [MF-card], [MF-docs]: layers of (mini) stage = num_layers // (pipeline_stage *
  // pp_interleave_num) + offset, and the offsets add up to the remainder ([MF-code]
  // _check_inputs enforces that sum), so any partition, negative offsets included, is an
  // offset list.
  const std::vector<int> offset = mindformers_offsets(layout.partition);

  // [MF-card]/[MF-docs]: an integer list gives, per (mini) stage, how many layers recompute;
  // 2-D lists give it per interleave and stage (a 1-D list with interleave would be spread
  // over the interleaves by MindFormers itself, so bmpipe always writes 2-D then).
  // [MF-code] LayerSetting._check_layer_rule and _set_select_recompute take the *first* n
  // layers of the stage (0 <= layer_id - first_layer_of_stage < n), and a layer in both
  // counts recomputes fully ([MF-card] note 1: "如果某一层同时配置了完全重计算与选择重计算，
  // 则按完全重计算生效"; the code sets select recompute only when full is not set). So a
  // stage of the form full*, selective*, none* — the order bmpipe's planner assigns — is
  // recompute = #full, select_recompute = #full + #selective; any other order is covered
  // by the shortest prefixes that hold every recomputed layer, which recompute more.
  std::vector<int> full(stages), select(stages);
  std::vector<int> out_of_order, empty;
  bool any_selective = false;
  for (int s = 0; s < stages; ++s) {
    full[s] = covering_prefix(layout.partition, layout.recompute, s, Recompute::full);
    select[s] = covering_prefix(layout.partition, layout.recompute, s, Recompute::selective);
    for (int i = starts[s]; i < starts[s + 1]; ++i) {
      const int k = i - starts[s];
      const Recompute runs = k < full[s]     ? Recompute::full
                             : k < select[s] ? Recompute::selective
                                             : Recompute::none;
      if (runs != layout.recompute[i]) {
        out_of_order.push_back(s);
        break;
      }
    }
    for (int i = starts[s]; i < starts[s + 1]; ++i)
      any_selective = any_selective || layout.recompute[i] == Recompute::selective;
    if (layout.partition[s] == 0) empty.push_back(s);
  }

  if (!interleaved_placement(layout))
    said.push_back(
        "MindFormers puts (mini) stage j of every interleave on pipeline rank j (LayerSetting: "
        "pipeline id = stage index mod pipeline_stage), so it cannot express this plan's V "
        "placement; the lists below run the same layers per stage, interleaved.");
  if (!out_of_order.empty())
    said.push_back("stage" + std::string(out_of_order.size() > 1 ? "s " : " ") +
                   stage_list(out_of_order) +
                   ": MindFormers recomputes the first n layers of a stage, full before "
                   "selective, and this plan's modes there are in another order; the counts "
                   "below recompute every layer the plan does, and more.");
  if (any_selective)
    said.push_back(
        "select_recompute as counts recomputes MindFormers' default operators (the MLP's "
        "activation: feed_forward.mul and the SiLU, or mlp.mul and mlp.activation_func.silu "
        "in mcore models), not the attention core that bmpipe's selective mode models; to "
        "match, give select_recompute as a dict from your model's attention-core operator "
        "patterns to these same counts.");
  if (!empty.empty())
    said.push_back("stage" + std::string(empty.size() > 1 ? "s " : " ") + stage_list(empty) +
                   (empty.size() > 1 ? " hold" : " holds") +
                   " no decoder layer; MindFormers' docs show no such stage, so check that "
                   "MindSpore accepts a pipeline stage without a transformer layer.");
  if (!layout.embedding_on_first || !layout.loss_on_last)
    said.push_back(
        "MindFormers builds the embedding on the first stage and the LM head on the last; the "
        "plan puts them elsewhere, which these keys cannot say.");

  std::ostringstream out;
  out << "# bmpipe plan: " << layers << " decoder layers, pipeline_stage " << pp;
  if (vpp > 1) out << ", pp_interleave_num " << vpp;
  out << ", layers per stage " << mindformers_stage_list(layout.partition, pp, vpp) << "\n";
  if (vpp > 1) {
    // [MF-card]: pp_interleave_num takes effect only with parallel.pipeline_config
    // .pipeline_interleave on ([MF-code]: otherwise LayerSetting resets it to 1).
    out << "parallel:\n  pipeline_config:\n    pipeline_interleave: True\n";
  }
  out << "parallel_config:\n  pipeline_stage: " << pp << "\n";
  out << "model:\n  model_config:\n";
  if (vpp > 1) out << "    pp_interleave_num: " << vpp << "\n";
  out << "    offset: " << mindformers_stage_list(offset, pp, vpp) << "\n";
  out << "recompute_config:\n";
  out << "  recompute: " << mindformers_stage_list(full, pp, vpp) << "\n";
  out << "  select_recompute: " << mindformers_stage_list(select, pp, vpp) << "\n";

  if (notes) *notes = std::move(said);
  return out.str();
}

// ---- Megatron-LM -------------------------------------------------------------------------

MegatronExport export_megatron(const ExportLayout& layout) {
  check_layout(layout);
  MegatronExport result;
  result.expressed = layout;
  ExportLayout& e = result.expressed;
  std::vector<std::string> why;
  const int stages = num_stages(layout);
  const int layers = static_cast<int>(layout.recompute.size());
  const std::vector<int> starts = stage_starts(layout.partition);

  if (!interleaved_placement(layout)) {
    // [MG-layout]: the flattened stage list is indexed vpp_rank * pp + pp_rank, so stage s
    // always runs on rank s mod pp; Megatron-LM has no V placement.
    for (int s = 0; s < stages; ++s) e.stage_rank[s] = s % layout.pp;
    why.push_back(
        "Megatron-LM runs stage s on pipeline rank s mod pp and has no V placement, so the "
        "flags run the same layers per stage with interleaved placement.");
  }
  if (!layout.embedding_on_first || !layout.loss_on_last) {
    // [MG-layout] validate_layer_layout: the first layer must be E and the last L.
    e.embedding_on_first = true;
    e.loss_on_last = true;
    why.push_back(
        "Megatron-LM always builds the embedding on the first stage and the loss on the last.");
  }

  std::vector<std::string> flags;
  flags.push_back("--pipeline-model-parallel-size " + std::to_string(layout.pp));
  flags.push_back("--num-layers " + std::to_string(layers));
  for (std::string& f : megatron_partition_flags(layout)) flags.push_back(std::move(f));

  // Recompute, from [MG-config] and [MG-block]:
  //  - selective: every layer, no method and no count ("'selective' always uses all
  //    layers"; recompute_num_layers must be None; [MG-args] refuses --recompute-method with
  //    it). Its default --recompute-modules is core_attn, the attention core that bmpipe's
  //    selective mode models, so no module flag is printed.
  //  - full + block N: within each TransformerBlock, i.e. each (virtual) stage, the first N
  //    layers recompute fully and the rest not at all (layer_idx < recompute_num_layers;
  //    N above a stage's size takes the whole stage).
  //  - full + uniform N: every layer, checkpointing the input of each group of N layers;
  //    with N = 1 that is full recompute of every layer, one layer input kept per layer.
  // One rule for all stages, and never selective beside full: a plan outside that gets the
  // smallest rule that recomputes every layer at least as much as the plan does.
  bool any_full = false, any_selective = false, any_none = false;
  for (Recompute r : layout.recompute) {
    any_full = any_full || r == Recompute::full;
    any_selective = any_selective || r == Recompute::selective;
    any_none = any_none || r == Recompute::none;
  }
  if (any_full) {
    int n = 0;
    for (int s = 0; s < stages; ++s)
      n = std::max(n, covering_prefix(layout.partition, layout.recompute, s, Recompute::selective));
    const int largest = *std::max_element(layout.partition.begin(), layout.partition.end());
    for (int s = 0; s < stages; ++s)
      for (int i = starts[s]; i < starts[s + 1]; ++i)
        e.recompute[i] = (i - starts[s] < n) ? Recompute::full : Recompute::none;
    flags.push_back("--recompute-granularity full");
    if (n >= largest) {
      flags.push_back("--recompute-method uniform");
      flags.push_back("--recompute-num-layers 1");
    } else {
      flags.push_back("--recompute-method block");
      flags.push_back("--recompute-num-layers " + std::to_string(n));
    }
    if (e.recompute != layout.recompute) {
      std::vector<int> full_counts(stages, 0), selective_counts(stages, 0);
      for (int s = 0; s < stages; ++s)
        for (int i = starts[s]; i < starts[s + 1]; ++i) {
          if (layout.recompute[i] == Recompute::full) ++full_counts[s];
          if (layout.recompute[i] == Recompute::selective) ++selective_counts[s];
        }
      why.push_back(
          "Megatron-LM recomputes in full the same first N layers of every stage and cannot mix "
          "selective with full; the plan has full " +
          format_int_list(full_counts) + " and selective " + format_int_list(selective_counts) +
          " layers per stage, so the nearest flags recompute " +
          (n >= largest ? std::string("every layer")
                        : "the first " + std::to_string(n) + " layers of every stage") +
          " in full.");
    }
  } else if (any_selective) {
    std::fill(e.recompute.begin(), e.recompute.end(), Recompute::selective);
    flags.push_back("--recompute-granularity selective");
    if (any_none) {
      const auto kept =
          std::count(layout.recompute.begin(), layout.recompute.end(), Recompute::none);
      why.push_back(
          "Megatron-LM's selective recompute covers every layer and takes no count; the plan "
          "keeps " +
          std::to_string(kept) + " of " + std::to_string(layers) +
          " layers without recompute, so the flags recompute those selectively too.");
    }
  }

  result.exact = why.empty();
  for (const std::string& w : why) result.note += (result.note.empty() ? "" : " ") + w;
  for (const std::string& f : flags) result.flags += f + "\n";
  return result;
}

std::vector<std::vector<Recompute>> megatron_recompute_choices(const std::vector<int>& partition) {
  const int layers = std::accumulate(partition.begin(), partition.end(), 0);
  const int largest = partition.empty() ? 0 : *std::max_element(partition.begin(), partition.end());
  std::vector<std::vector<Recompute>> out;
  out.emplace_back(layers, Recompute::none);
  out.emplace_back(layers, Recompute::selective);
  // [MG-block]: full + block N recomputes layer_idx < N of every (virtual) stage.
  for (int n = 1; n < largest; ++n) {
    std::vector<Recompute> modes;
    for (int count : partition)
      for (int k = 0; k < count; ++k) modes.push_back(k < n ? Recompute::full : Recompute::none);
    out.push_back(std::move(modes));
  }
  out.emplace_back(layers, Recompute::full);
  return out;
}

}  // namespace bmpipe
