// Whole-layer activation offload within a pass (sim/layer_offload.hpp): Transformer
// Engine's default scheduling, which Megatron-LM's --cpu-offloading-num-layers uses. Every
// expected figure is worked by hand below.
#include "sim/layer_offload.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace bmpipe {
namespace {

std::vector<LayerOffloadLayer> uniform(int n, Time f, Time b, std::int64_t bytes, Time copy) {
  return std::vector<LayerOffloadLayer>(static_cast<std::size_t>(n), {f, b, bytes, copy});
}

// TE's Figure 3 (cpu_offloading.rst): 2 of 5 layers offloaded, 3 sets on the device, and a
// copy (5) shorter than a layer (forward 10, backward 20): everything hides.
//   forward: copy 0 runs 10..15, layer 3 (= W + 0) starts at 30; copy 1 runs 20..25, layer 4
//            starts at 40.
//   backward: after layer 4's (0..20) layer 1 comes back (20..25), after layer 3's (..40)
//            layer 0 (40..45); layers 1 and 0 start at 60 and 80.
TEST(LayerOffload, CopiesShorterThanALayerHideAndThePeakIsTheWindow) {
  const LayerOffloadPass p = layer_offload_pass(uniform(5, 10, 20, 100, 5), 2);
  EXPECT_EQ(p.forward_wait, 0);
  EXPECT_EQ(p.backward_wait, 0);
  EXPECT_EQ(p.peak_bytes, 300);  // W = 5 - 2 = 3 sets of 100
  EXPECT_EQ(p.host_bytes, 200);
}

// TE's Figure 4: 3 of 5 layers offloaded leaves W = 2 sets, and a slow link (copy 25 against
// a forward of 10 and a backward of 20) stalls both passes.
//   forward: L0 0-10, copy0 10-35; L1 10-20, copy1 35-60; L2 waits copy0: 35-45, copy2
//            60-85; L3 waits copy1: 60-70; L4 waits copy2: 85-95. 95 - 50 = 45 waited.
//   backward: L4 0-20, then reload2 20-45; L3 20-40, reload1 45-70; L2 waits reload2:
//            45-65, reload0 70-95; L1 waits reload1: 70-90; L0 waits reload0: 95-115.
//            115 - 100 = 15 waited.
TEST(LayerOffload, ASlowLinkStallsTheForwardAndTheBackward) {
  const LayerOffloadPass p = layer_offload_pass(uniform(5, 10, 20, 7, 25), 3);
  EXPECT_EQ(p.forward_wait, 45);
  EXPECT_EQ(p.backward_wait, 15);
  EXPECT_EQ(p.peak_bytes, 14);
  EXPECT_EQ(p.host_bytes, 21);
}

// k = L - 1 leaves one set on the device: "compute and transfers cannot overlap" (TE's
// docs). Each layer after the first waits for the whole copy of the one before it:
// forward = L f + (L - 1) c, so the forward waits (L - 1) c. In backward, layer j's copy
// back starts when layer j + 1's backward ends, so each of the L - 1 offloaded layers
// waits its copy: (L - 1) c again.
TEST(LayerOffload, OneSetOnTheDeviceSerialisesComputeAndCopies) {
  const int layers = 6;
  const Time c = 3;
  const LayerOffloadPass p = layer_offload_pass(uniform(layers, 10, 20, 1, c), layers - 1);
  EXPECT_EQ(p.forward_wait, (layers - 1) * c);
  EXPECT_EQ(p.backward_wait, (layers - 1) * c);
  EXPECT_EQ(p.peak_bytes, 1);
}

// Unlike layers: the peak is the largest sum of W consecutive layers' bytes. Bytes 1..5,
// 2 offloaded: W = 3, windows 1+2+3, 2+3+4, 3+4+5: 12. The host holds layers 0 and 1: 3.
TEST(LayerOffload, ThePeakOfUnlikeLayersIsTheLargestWindow) {
  std::vector<LayerOffloadLayer> layers;
  for (int i = 1; i <= 5; ++i) layers.push_back({10, 20, i, 0});
  const LayerOffloadPass p = layer_offload_pass(layers, 2);
  EXPECT_EQ(p.peak_bytes, 12);
  EXPECT_EQ(p.total_bytes, 15);
  EXPECT_EQ(p.host_bytes, 3);
  // Nothing offloaded: every layer's bytes, nothing waited.
  const LayerOffloadPass none = layer_offload_pass(layers, 0);
  EXPECT_EQ(none.peak_bytes, 15);
  EXPECT_EQ(none.host_bytes, 0);
  EXPECT_EQ(none.forward_wait + none.backward_wait, 0);
}

TEST(LayerOffload, RefusesAllLayersAndNegativeFigures) {
  EXPECT_THROW(layer_offload_pass(uniform(4, 1, 1, 1, 1), 4), std::invalid_argument);
  EXPECT_THROW(layer_offload_pass(uniform(4, 1, 1, 1, 1), -1), std::invalid_argument);
  EXPECT_THROW(layer_offload_pass(uniform(4, 1, 1, 1, -1), 1), std::invalid_argument);
  EXPECT_NO_THROW(layer_offload_pass({}, 0));
}

}  // namespace
}  // namespace bmpipe
