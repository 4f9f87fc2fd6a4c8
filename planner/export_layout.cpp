#include "planner/export_layout.hpp"

#include <cctype>

namespace bmpipe {

std::vector<int> decoder_layers(const Experiment& e) {
  const int L = e.num_layers();
  // Separate ends, or a vision model's rows before the LLM's: the rows say their kind.
  const bool vision = L > 0 && e.layers.layers.front().kind == LayerKind::vision;
  if (e.layers.separate_ends || vision) {
    std::vector<int> out;
    for (int l = 0; l < L; ++l)
      if (e.layers.layers[l].kind == LayerKind::decoder) out.push_back(l);
    return out;
  }
  auto named = [&](int layer, std::initializer_list<const char*> words) {
    if (e.analytic || L < 2) return false;
    std::string name = e.layers.layers[layer].name;
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* w : words)
      if (name.find(w) != std::string::npos) return true;
    return false;
  };
  const bool embedding = named(0, {"embed"});
  const bool head = named(L - 1, {"head", "loss"});
  std::vector<int> out;
  for (int l = 0; l < L; ++l)
    if (!(embedding && l == 0) && !(head && l == L - 1)) out.push_back(l);
  return out;
}

ExportLayout export_layout(const Experiment& e, const Plan& plan, const Schedule& schedule) {
  ExportLayout x;
  x.pp = schedule.num_ranks;
  x.vpp = schedule.chunks_per_device();
  x.stage_rank = schedule.stage_rank;
  if (e.config.model.shape) x.mtp_layers = e.config.model.shape->mtp_layers;
  const std::vector<int> decoders = decoder_layers(e);
  std::size_t next = 0;
  int layer = 0;
  for (int n : plan.partition) {
    int count = 0, mtp = 0;
    for (int i = 0; i < n; ++i, ++layer) {
      if (next < decoders.size() && decoders[next] == layer) {
        ++count, ++next;
        x.recompute.push_back(plan.recompute[layer]);
      }
      if (layer < e.num_layers() && e.layers.layers[layer].kind == LayerKind::mtp) ++mtp;
    }
    x.partition.push_back(count);
    if (e.layers.separate_ends) x.mtp_per_stage.push_back(mtp);
  }
  return x;
}

Plan with_decoder_modes(const Experiment& e, Plan plan, const std::vector<Recompute>& modes) {
  const std::vector<int> decoders = decoder_layers(e);
  for (std::size_t k = 0; k < decoders.size() && k < modes.size(); ++k)
    if (e.layers.layers[decoders[k]].has(modes[k])) plan.recompute[decoders[k]] = modes[k];
  // Separate ends: the MTP layers run as the last decoder layer does, as they do folded
  // into it.
  if (e.layers.separate_ends && !decoders.empty())
    for (int l = decoders.back() + 1; l < e.num_layers(); ++l)
      if (e.layers.layers[l].kind == LayerKind::mtp &&
          e.layers.layers[l].has(plan.recompute[decoders.back()]))
        plan.recompute[l] = plan.recompute[decoders.back()];
  return plan;
}

}  // namespace bmpipe
