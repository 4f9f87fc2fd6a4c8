#include "sim/topology.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace bmpipe {
struct Topology::Graph {
  using Type = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                     boost::property<boost::edge_index_t, int>>;
  explicit Graph(int vertices) : g(vertices) {}
  Type g;
};

Topology::~Topology() = default;

namespace {

// The device count, or an error before anything is allocated: the product must fit the
// int device ids, and so must the link ids of the full mesh inside each node.
int checked_devices(const ClusterSpec& spec) {
  if (spec.nodes < 1 || spec.devices_per_node < 1)
    throw std::invalid_argument("topology needs at least one node and one device per node");
  const std::int64_t devices = static_cast<std::int64_t>(spec.nodes) * spec.devices_per_node;
  const std::int64_t links = devices * (spec.devices_per_node - 1) + 4 * devices;
  if (links > std::numeric_limits<int>::max())
    throw std::invalid_argument("topology of " + std::to_string(spec.nodes) + " x " +
                                std::to_string(spec.devices_per_node) +
                                " devices has more links than int ids can count");
  return static_cast<int>(devices);
}

// A link whose figures would make a transfer time leave int64 ns, or be no number at all,
// is refused here rather than turning into a negative edge or a missing path later.
Time checked_latency(const LinkSpec& l) {
  if (!(l.bandwidth_GBps > 0.0) || !std::isfinite(l.bandwidth_GBps) ||
      std::fpclassify(l.bandwidth_GBps) == FP_SUBNORMAL)
    throw std::invalid_argument("link bandwidth must be a positive, normal number, got " +
                                std::to_string(l.bandwidth_GBps) + " GB/s");
  const std::optional<Time> ns = checked_us_to_ns(l.latency_us);
  if (!ns || *ns < 0)
    throw std::invalid_argument(
        "link latency must be a non-negative number of us that fits in "
        "int64 ns, got " +
        std::to_string(l.latency_us));
  return *ns;
}

}  // namespace

Time Route::serialization(std::int64_t bytes) const {
  if (bytes <= 0 || links.empty()) return 0;
  const std::optional<Time> t = checked_to_ns(static_cast<double>(bytes) / bytes_per_ns, 1.0);
  if (!t)
    throw std::invalid_argument("a transfer of " + std::to_string(bytes) + " bytes at " +
                                std::to_string(bytes_per_ns) +
                                " GB/s takes longer than int64 ns can count");
  return *t;
}

Topology::Topology(const ClusterSpec& spec)
    : num_devices_(checked_devices(spec)), devices_per_node_(spec.devices_per_node) {
  domain_ = spec.domain();
  if (domain_ < spec.devices_per_node || domain_ % spec.devices_per_node != 0 ||
      num_devices_ % domain_ != 0)
    throw std::invalid_argument("a scale-up domain of " + std::to_string(domain_) +
                                " devices must hold whole nodes of " +
                                std::to_string(spec.devices_per_node) + " and divide the " +
                                std::to_string(num_devices_) + " devices");
  const bool switched = domain_ > spec.devices_per_node;
  vertices_ = num_devices_ + 1 + (switched ? num_devices_ / domain_ : 0);
  const Time intra_latency = spec.devices_per_node > 1 ? checked_latency(spec.intra_node) : 0;
  const Time inter_latency = spec.nodes > 1 ? checked_latency(spec.inter_node) : 0;
  auto add = [&](int from, int to, const LinkSpec& l, Time latency) {
    links_.push_back(Link{from, to, l.bandwidth_GBps, latency});
  };
  for (int node = 0; node < spec.nodes; ++node) {
    const int base = node * spec.devices_per_node;
    for (int a = 0; a < spec.devices_per_node; ++a)
      for (int b = 0; b < spec.devices_per_node; ++b)
        if (a != b) add(base + a, base + b, spec.intra_node, intra_latency);
  }
  if (spec.nodes > 1) {
    const int fabric = num_devices_;
    for (int d = 0; d < num_devices_; ++d) {
      add(d, fabric, spec.inter_node, inter_latency);
      add(fabric, d, spec.inter_node, 0);
    }
  }
  if (switched) {
    for (int d = 0; d < num_devices_; ++d) {
      const int sw = num_devices_ + 1 + d / domain_;
      add(d, sw, spec.intra_node, intra_latency);
      add(sw, d, spec.intra_node, 0);
    }
  }
  graph_ = std::make_unique<Graph>(vertices_);
  for (int id = 0; id < static_cast<int>(links_.size()); ++id)
    boost::add_edge(links_[id].from, links_[id].to, id, graph_->g);
}

Route Topology::route(int src, int dst, std::int64_t bytes) const {
  const auto key = std::make_tuple(src, dst, bytes);
  {
    std::lock_guard<std::mutex> lock(memo_mutex_);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  }
  Route r = compute_route(src, dst, bytes);
  std::lock_guard<std::mutex> lock(memo_mutex_);
  return memo_.emplace(key, std::move(r)).first->second;
}

Route Topology::compute_route(int src, int dst, std::int64_t bytes) const {
  using Vertex = Graph::Type::vertex_descriptor;
  Route r;
  if (src == dst) return r;
  if (src < 0 || dst < 0 || src >= num_devices_ || dst >= num_devices_)
    throw std::invalid_argument("route between unknown devices " + std::to_string(src) + " and " +
                                std::to_string(dst));
  const int vertices = vertices_;
  const auto& g = graph_->g;
  std::vector<double> weight(links_.size());
  for (int id = 0; id < static_cast<int>(links_.size()); ++id) {
    const Link& l = links_[id];
    weight[id] = static_cast<double>(l.latency) + static_cast<double>(bytes) / l.bytes_per_ns;
    // Beyond int64 ns the engine could not hold the transfer's end time.
    if (!(weight[id] < 9.2e18))
      throw std::invalid_argument("a transfer of " + std::to_string(bytes) + " bytes over link " +
                                  std::to_string(id) + " (" + std::to_string(l.from) + " -> " +
                                  std::to_string(l.to) + ") takes longer than int64 ns can count");
  }
  std::vector<Vertex> pred(vertices);
  std::vector<double> dist(vertices);
  auto index = boost::get(boost::edge_index, g);
  boost::dijkstra_shortest_paths(
      g, static_cast<Vertex>(src),
      boost::predecessor_map(pred.data())
          .distance_map(dist.data())
          .weight_map(boost::make_iterator_property_map(weight.data(), index)));
  if (pred[dst] == static_cast<Vertex>(dst))
    throw std::invalid_argument("no path from device " + std::to_string(src) + " to device " +
                                std::to_string(dst));
  // Walk back from dst; among parallel edges between the same vertices pick the lowest id
  // of minimal weight, so the route does not depend on adjacency order.
  std::vector<int> reversed;
  for (auto v = static_cast<Vertex>(dst); v != static_cast<Vertex>(src);) {
    const auto u = pred[v];
    int best = -1;
    for (int id = 0; id < static_cast<int>(links_.size()); ++id)
      if (links_[id].from == static_cast<int>(u) && links_[id].to == static_cast<int>(v) &&
          (best < 0 || weight[id] < weight[best]))
        best = id;
    reversed.push_back(best);
    v = u;
  }
  r.links.assign(reversed.rbegin(), reversed.rend());
  r.bytes_per_ns = links_[r.links.front()].bytes_per_ns;
  for (int id : r.links) {
    r.latency += links_[id].latency;
    r.bytes_per_ns = std::min(r.bytes_per_ns, links_[id].bytes_per_ns);
  }
  return r;
}

}  // namespace bmpipe
