#pragma once
/// \file
/// Whole-layer activation offload within one forward and backward pass: Megatron-LM's
/// --cpu-offloading-num-layers N, which hands the decoder layers to Transformer Engine's
/// CPU offload with its default scheduling (NVIDIA/Megatron-LM d98e8a64,
/// megatron/core/transformer/transformer_block.py, get_cpu_offload_context(cpu_offloading,
/// cpu_offloading_num_layers, num_layers, ...); NVIDIA/TransformerEngine d0067d0d,
/// transformer_engine/pytorch/cpu_offload.py, DefaultOffloadSynchronizer, and
/// docs/features/other_optimizations/cpu_offloading/cpu_offloading.rst).
///
/// The model. A pass runs L layers forward (0 .. L-1) then backward (L-1 .. 0); the first k
/// (0 <= k < L) offload their saved activations, and W = L - k sets may be on the device at
/// once. One copy stream carries both directions, FIFO.
/// - Forward. Layer i < k's copy out is queued when the layer's forward ends (TE queues it
///   at the next layer's fwd_step; its copies wait for the tensors' events, which the
///   layer records as it saves them: starting at the layer's end is the latest they can
///   start, so this model is conservative by at most one layer's copy). Layer W + i
///   (the one TE's finish_offload_map names for i) starts only when layer i's copy out has
///   ended, and then layer i's device memory is released (release_activation_forward_gpu_
///   memory makes the compute stream wait on the copy's event).
/// - Backward. Layer i's copy back is queued before the backward of layer W - 1 + i
///   (start_reload_map) and waits for the compute stream, i.e. it starts when the backward
///   of layer W + i ends (or later, if the stream is busy); layer i's backward starts only
///   when its copy back has ended (pop_tensor waits on the reload event). TE may let part of
///   a layer's backward run on tensors that came back first; here a layer's copy is one
///   piece.
/// - Memory. A layer's activations are on the device from its forward's start to the
///   release above (offloaded layers) or to the end of its backward (the others); a copy
///   back charges them again from its start. So at any time the device holds the
///   activations of at most W consecutive layers: in forward, at layer j's start, layers
///   j - W + 1 .. j (the copy of layer j - W has been waited for and released); in
///   backward, when layer j runs, layers j - W + 1 .. j (the copy of layer i starts after
///   the backward of W + i, freed at that moment). The peak is the largest sum of W
///   consecutive layers' bytes: W x a for uniform layers, as TE's docstring states.
/// - Time. What a pass waits for: in forward, a layer held for a copy out; in backward, a
///   layer held for its copy back. Each micro-batch's pass starts with an idle copy stream
///   (every copy out ends before layer L - 1 starts, every copy back before layer 0's
///   backward), so every pass of a stage waits the same.

#include <cstdint>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe {

struct LayerOffloadLayer {
  Time forward = 0;        ///< the layer's forward
  Time backward = 0;       ///< its full backward (input and weight gradients)
  std::int64_t bytes = 0;  ///< activations it saves for its backward
  Time copy = 0;           ///< one copy of those bytes, either way, on the host link
};

struct LayerOffloadPass {
  Time forward_wait = 0;   ///< how long the forward is held for copies out
  Time backward_wait = 0;  ///< how long the backward is held for copies back
  /// The most activation bytes of these layers on the device at once, and every layer's
  /// (what the device would hold at once without offload).
  std::int64_t peak_bytes = 0;
  std::int64_t total_bytes = 0;
  /// The bytes that go to the host (the first `offloaded` layers'): one pass's.
  std::int64_t host_bytes = 0;
};

/// One pass of `layers` (in model order) with the first `offloaded` of them offloaded.
/// Throws std::invalid_argument unless 0 <= offloaded < layers.size() (TE asserts
/// num_layers <= model_layers - 1) or when a time or size is negative.
LayerOffloadPass layer_offload_pass(const std::vector<LayerOffloadLayer>& layers, int offloaded);

}  // namespace bmpipe
