#pragma once
/// \file
/// torchtitan's models, by [model] name and flavor: the shapes of its model args (each
/// model's __init__.py) as bmpipe's ModelShape, the one table the importer reads a flavor from
/// and the exporter names one with. Pure functions.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sim/cost/model_shape.hpp"

namespace bmpipe {

/// One flavor of one of torchtitan's models that bmpipe models.
struct TorchTitanFlavor {
  std::string_view model;   ///< [model] name: "llama3"
  std::string_view flavor;  ///< [model] flavor: "8B"
  std::string_view label;   ///< model.name of an imported job: "llama3-8b"
  /// torchtitan's model args as a HuggingFace config.json, which experiment/hf_config.cpp reads
  /// into a shape (so that both spell the shape the same way).
  std::string_view hf_json;
  /// What bmpipe's cost model approximates of it, a sentence, or empty.
  std::string_view note;
};

/// Every flavor bmpipe models, in the help's order.
std::span<const TorchTitanFlavor> torchtitan_flavors();

/// The flavor `flavor` of model `model`, or nullptr.
const TorchTitanFlavor* find_torchtitan_flavor(std::string_view model, std::string_view flavor);

/// The shape of `f`.
ModelShape torchtitan_shape(const TorchTitanFlavor& f);

/// The flavor whose shape is `m` (its name aside), or nullptr.
const TorchTitanFlavor* torchtitan_flavor_of(const ModelShape& m);

/// "llama3 8B, 70B, 405B; deepseek_v3 16B, 671B", for messages.
std::string torchtitan_flavor_names();

/// Whether two shapes are the same model (every field but the name).
bool same_model_shape(const ModelShape& a, const ModelShape& b);

}  // namespace bmpipe
