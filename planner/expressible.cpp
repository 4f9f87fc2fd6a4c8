// What a framework can state of a plan (plan --expressible, asked of its exporter row), and
// the first-N order both frameworks recompute in. Declared in planner.hpp.
#include <algorithm>
#include <stdexcept>

#include "frameworks/exporters.hpp"
#include "planner/planner.hpp"

namespace bmpipe {

namespace {

/// 0 for full, 1 for selective, 2 for none: the first-N order.
int rank_of(Recompute r) {
  // (An offload mode ranks with the recompute mode it runs: selective_offload with
  // selective, offload with none.)
  r = device_mode(r);
  return r == Recompute::full ? 0 : r == Recompute::selective ? 1 : 2;
}

}  // namespace

Plan first_n_order(const Experiment& e, const Plan& plan) {
  const int L = e.num_layers();
  std::vector<char> decoder(L, 0);
  for (int l : decoder_layers(e)) decoder[l] = 1;
  Plan out = plan;
  for (int s = 0, first = 0; s < static_cast<int>(plan.partition.size());
       first += plan.partition[s], ++s) {
    std::vector<int> layers;
    for (int l = first; l < first + plan.partition[s]; ++l)
      if (decoder[l]) layers.push_back(l);
    std::vector<Recompute> modes;
    for (int l : layers) modes.push_back(plan.recompute[l]);
    std::stable_sort(modes.begin(), modes.end(),
                     [](Recompute a, Recompute b) { return rank_of(a) < rank_of(b); });
    bool possible = true;
    for (std::size_t k = 0; k < layers.size(); ++k)
      possible = possible && e.layers.layers[layers[k]].has(modes[k]);
    if (!possible) continue;
    for (std::size_t k = 0; k < layers.size(); ++k) out.recompute[layers[k]] = modes[k];
  }
  return out;
}

bool expressible_by(const Experiment& e, const Plan& plan, const Schedule& schedule,
                    const Exporter* x) {
  if (!x) return true;
  ExportLayout l;
  try {
    l = export_layout(e, plan, schedule);
    check_export_layout(l);
  } catch (const std::invalid_argument&) {
    return false;  // e.g. virtual stages without pipeline ranks: neither framework has them
  }
  return x->states(l);
}

}  // namespace bmpipe
