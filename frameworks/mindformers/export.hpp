#pragma once
/// \file
/// A plan in MindFormers' words: its YAML keys. Pure functions of the layout; nothing here
/// simulates.

#include <string>
#include <vector>

#include "frameworks/common/export_layout.hpp"

namespace bmpipe {

/// MindFormers keys (a YAML fragment): model.model_config.offset and pp_interleave_num,
/// recompute_config.recompute and select_recompute, as lists per stage (2-D when vpp > 1).
/// `notes` gets one line per thing MindFormers cannot express exactly (empty if none).
std::string export_mindformers(const ExportLayout& layout, std::vector<std::string>* notes);

}  // namespace bmpipe
