#pragma once
/// \file
/// The export glue: a planner plan (in model layers) as the decoder-layer layout the
/// framework exports write (ExportLayout).

#include <vector>

#include "experiment/experiment.hpp"
#include "frameworks/common/export_layout.hpp"

namespace bmpipe {

/// The plan in decoder layers, for the exports. Analytic models fold the embedding and the
/// head into the first and last decoder layer; a measured model whose first layer group is
/// named like an embedding ("embed...") or whose last is named like a head ("...head",
/// "...loss", "lm_head") has those rows taken out of the decoder counts.
ExportLayout export_layout(const Experiment& e, const Plan& plan, const Schedule& schedule);

/// The layers export_layout counts as decoder layers, in model order (not a vision model's
/// encoder blocks and projector).
std::vector<int> decoder_layers(const Experiment& e);

/// `plan` with its decoder layers' modes replaced by `modes` (one per decoder layer, as an
/// export gives them back); a mode a layer cannot run leaves that layer as it was. With
/// separate ends the MTP rows take the last decoder layer's mode.
Plan with_decoder_modes(const Experiment& e, Plan plan, const std::vector<Recompute>& modes);

}  // namespace bmpipe
