#include "frameworks/common/export_layout.hpp"

#include <cstddef>
#include <stdexcept>

// Sources (read, not copied), cited below by these short names:
//  [MF-card]   MindFormers, docs/feature_cards/Offset_Recompute.md, at f1e33c5629d5.
//  [MG-block]  Megatron-LM, megatron/core/transformer/transformer_block.py
//              (get_num_layers_to_build), at d98e8a64ddf3.

namespace bmpipe {

int export_stage_count(const ExportLayout& l) {
  return l.pp * l.vpp;
}

void check_export_layout(const ExportLayout& l) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("export: " + what); };
  if (l.pp < 1) fail("pp must be at least 1, got " + std::to_string(l.pp));
  if (l.vpp < 1) fail("vpp must be at least 1, got " + std::to_string(l.vpp));
  // Both frameworks interleave only across pipeline ranks ([MF-card]: pp-interleave works
  // only with pipeline_stage > 1; [MG-block]: chunks are split only when pp > 1).
  if (l.vpp > 1 && l.pp == 1) fail("vpp > 1 needs pp > 1: there is no pipeline to interleave");
  const auto stages = static_cast<std::size_t>(export_stage_count(l));
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

ExportRefusal export_layout_refusal(const ExportLayout& l, const std::string& framework) {
  // [MF-card], [MG-block]: virtual stages are chunks across pipeline ranks; one rank holding
  // two (a V schedule's pair at pp 1) is a layout neither framework has.
  if (l.vpp > 1 && l.pp == 1)
    return {"training.schedule",
            "puts " + std::to_string(l.vpp) +
                " stages on the one pipeline rank (training.pp is 1); " + framework +
                " splits a rank's layers into virtual stages only across pipeline ranks, so "
                "no setting of it states this layout: export with training.pp > 1, or with "
                "schedule 1f1b at pp 1 (the same layers on one device)"};
  if (l.recompute.empty())
    return {"model.layers",
            "has no decoder layer (only an embedding and a head, by their names), and " +
                framework + " pipelines decoder layers: there is nothing to split or recompute"};
  return {};
}

bool interleaved_placement(const ExportLayout& l) {
  for (int s = 0; s < export_stage_count(l); ++s)
    if (l.stage_rank[s] != s % l.pp) return false;
  return true;
}

std::string stages_in_words(const std::vector<int>& stages) {
  std::string out;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    if (i > 0) out += (i + 1 == stages.size()) ? " and " : ", ";
    out += std::to_string(stages[i]);
  }
  return out;
}

}  // namespace bmpipe
