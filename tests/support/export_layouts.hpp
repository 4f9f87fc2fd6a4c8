#pragma once
// ExportLayouts for the export and import tests: a plan written as layers per stage and
// mode counts per stage, and the layout an imported job describes.
#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

#include "frameworks/common/export_layout.hpp"
#include "frameworks/common/import_common.hpp"

namespace bmpipe::test {

struct StageModes {
  int full = 0;
  int selective = 0;  // the rest of the stage keeps its activations
};

/// A plan with interleaved placement (stage s on rank s mod pp) whose stages list their full
/// layers first, then selective, then none, as bmpipe's planner assigns them. Stages past
/// the end of `modes` recompute nothing.
inline ExportLayout plan(int pp, int vpp, std::vector<int> partition,
                         std::vector<StageModes> modes = {}) {
  ExportLayout l;
  l.pp = pp;
  l.vpp = vpp;
  for (int s = 0; s < pp * vpp; ++s) l.stage_rank.push_back(s % pp);
  if (modes.size() > partition.size()) throw std::invalid_argument("test plan: too many stages");
  modes.resize(partition.size());
  for (std::size_t s = 0; s < partition.size(); ++s)
    for (int k = 0; k < partition[s]; ++k)
      l.recompute.push_back(k < modes[s].full                        ? Recompute::full
                            : k < modes[s].full + modes[s].selective ? Recompute::selective
                                                                     : Recompute::none);
  l.partition = std::move(partition);
  return l;
}

/// The layout of an imported job, with interleaved placement.
inline ExportLayout layout_of(const ImportedJob& job) {
  ExportLayout l;
  l.pp = job.pp;
  l.vpp = job.vpp;
  for (int s = 0; s < job.pp * job.vpp; ++s) l.stage_rank.push_back(s % job.pp);
  l.partition = job.partition;
  l.recompute = job.recompute;
  return l;
}

}  // namespace bmpipe::test
