#include "sim/layer_offload.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace bmpipe {

LayerOffloadPass layer_offload_pass(const std::vector<LayerOffloadLayer>& layers, int offloaded) {
  const int n = static_cast<int>(layers.size());
  if (offloaded < 0 || offloaded >= std::max(n, 1))
    throw std::invalid_argument("layer_offload_pass: " + std::to_string(offloaded) +
                                " offloaded layers of " + std::to_string(n) +
                                " (expected 0 <= offloaded < layers)");
  for (const LayerOffloadLayer& l : layers)
    if (l.forward < 0 || l.backward < 0 || l.bytes < 0 || l.copy < 0)
      throw std::invalid_argument("layer_offload_pass: a negative time or size");
  const int window = n - offloaded;  // W: the sets the device may hold at once
  LayerOffloadPass out;
  std::vector<Time> copied(static_cast<std::size_t>(offloaded), 0);  // each copy's end

  // Forward: layer j waits for the copy out of layer j - W.
  Time t = 0, stream = 0, work = 0;
  for (int j = 0; j < n; ++j) {
    const LayerOffloadLayer& l = layers[static_cast<std::size_t>(j)];
    const int released = j - window;
    if (released >= 0 && released < offloaded)
      t = std::max(t, copied[static_cast<std::size_t>(released)]);
    t += l.forward;
    work += l.forward;
    if (j < offloaded) {
      stream = std::max(stream, t) + l.copy;
      copied[static_cast<std::size_t>(j)] = stream;
    }
  }
  out.forward_wait = t - work;

  // Backward: after layer j's backward the copy back of layer j - W starts; layer i < k
  // waits for its own.
  t = 0, stream = 0, work = 0;
  for (int j = n - 1; j >= 0; --j) {
    const LayerOffloadLayer& l = layers[static_cast<std::size_t>(j)];
    if (j < offloaded) t = std::max(t, copied[static_cast<std::size_t>(j)]);
    t += l.backward;
    work += l.backward;
    const int back = j - window;
    if (back >= 0 && back < offloaded) {
      stream = std::max(stream, t) + layers[static_cast<std::size_t>(back)].copy;
      copied[static_cast<std::size_t>(back)] = stream;
    }
  }
  out.backward_wait = t - work;

  // The most W consecutive layers hold (fewer at the start: a prefix of the first W).
  std::int64_t sum = 0;
  for (int j = 0; j < n; ++j) {
    sum += layers[static_cast<std::size_t>(j)].bytes;
    if (j >= window) sum -= layers[static_cast<std::size_t>(j - window)].bytes;
    out.peak_bytes = std::max(out.peak_bytes, sum);
    out.total_bytes += layers[static_cast<std::size_t>(j)].bytes;
  }
  for (int i = 0; i < offloaded; ++i) out.host_bytes += layers[static_cast<std::size_t>(i)].bytes;
  return out;
}

}  // namespace bmpipe
