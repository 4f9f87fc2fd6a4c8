#include "experiment/write_config.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "experiment/config.hpp"

namespace bmpipe {

namespace {

YAML::Node recompute_node(const std::vector<Recompute>& modes) {
  PerMode<int> count;
  for (Recompute r : modes) ++count[r];
  Recompute common = Recompute::none;
  for (Recompute r : kAllModes)
    if (count[r] > count[common]) common = r;
  if (count[common] == static_cast<int>(modes.size()))
    return YAML::Node(std::string(recompute_name(common)));
  YAML::Node node(YAML::NodeType::Map);
  node["default"] = std::string(recompute_name(common));
  YAML::Node layers(YAML::NodeType::Map);
  for (std::size_t l = 0; l < modes.size(); ++l)
    if (modes[l] != common) layers[static_cast<int>(l)] = std::string(recompute_name(modes[l]));
  layers.SetStyle(YAML::EmitterStyle::Flow);
  node["layers"] = layers;
  return node;
}

}  // namespace

std::string config_with_edits(const std::string& source_text, const std::string& source_path,
                              const std::string& out_path, const ConfigEdits& edits,
                              const std::string& header, std::optional<double> device_memory_GiB) {
  YAML::Node root;
  try {
    root = YAML::Load(source_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source_path, e.mark.line + 1, "", "malformed YAML: " + e.msg);
  }
  if (!root.IsMap() || !root["training"].IsMap())
    throw ConfigError(source_path, 1, "training", "expected a mapping with a training section");
  YAML::Node t = root["training"];
  t["schedule"] = edits.schedule;
  t["pp"] = edits.pp;
  t["vpp"] = edits.vpp;
  t["microbatches"] = edits.microbatches;
  if (edits.tp) t["tp"] = *edits.tp;
  if (edits.dp) t["dp"] = *edits.dp;
  if (edits.micro_batch_size) t["micro_batch_size"] = *edits.micro_batch_size;
  if (edits.ep) t["ep"] = *edits.ep;
  if (edits.etp) t["etp"] = *edits.etp;
  if (edits.cp) t["cp"] = *edits.cp;
  if (edits.sequence_parallel) t["sequence_parallel"] = *edits.sequence_parallel;
  if (edits.tp_comm_overlap) t["tp_comm_overlap"] = *edits.tp_comm_overlap;
  // microbatches now says it; a global batch would have to agree with it, and dp may have
  // been derived from a different pp.
  if (!edits.megatron_layout.empty()) {
    // The layout places every layer: it is the partition.
    t["megatron_layout"] = edits.megatron_layout;
    t.remove("partition");
  } else {
    YAML::Node partition(YAML::NodeType::Sequence);
    for (int n : edits.partition) partition.push_back(n);
    partition.SetStyle(YAML::EmitterStyle::Flow);
    t["partition"] = partition;
  }
  if (edits.separate_ends) {
    // A layout with stages of their own would be a second partition.
    if (edits.megatron_layout.empty()) t.remove("megatron_layout");
    t["separate_ends"] = true;
  }
  t["recompute"] = recompute_node(edits.recompute);
  // Beside a device preset, the key overrides the preset's capacity.
  if (device_memory_GiB) root["cluster"]["device"]["memory_GiB"] = *device_memory_GiB;
  // A relative HF config path is relative to the file that names it.
  YAML::Node model = root["model"];
  if (model.IsMap() && model["hf_config"].IsScalar()) {
    const std::filesystem::path hf(model["hf_config"].Scalar());
    if (hf.is_relative()) {
      const std::filesystem::path target =
          std::filesystem::absolute(std::filesystem::path(source_path).parent_path() / hf);
      const std::filesystem::path from =
          std::filesystem::absolute(std::filesystem::path(out_path)).parent_path();
      model["hf_config"] = std::filesystem::relative(target, from).lexically_normal().string();
    }
  }
  YAML::Emitter out;
  out << root;
  std::ostringstream text;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) text << "# " << line << "\n";
  text << out.c_str() << "\n";
  return text.str();
}

}  // namespace bmpipe
