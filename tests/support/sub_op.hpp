#pragma once
/// \file
/// A named sub-op of a cost-model layer, for the tests that work one out by hand.

#include <gtest/gtest.h>

#include <string>

#include "sim/cost/cost_model.hpp"

namespace bmpipe::test {

/// The sub-op of `c` called `name`; a test failure (and the layer's first op) when it has
/// none.
inline const SubOpCost& op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return o;
  ADD_FAILURE() << "no sub-op " << name << " in " << c.name;
  return c.ops.front();
}

}  // namespace bmpipe::test
