#include "sim/topology.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <cmath>
#include <stdexcept>

namespace bmpipe {
struct Topology::Graph {
  using Type = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                     boost::property<boost::edge_index_t, int>>;
  explicit Graph(int vertices) : g(vertices) {}
  Type g;
};

Topology::~Topology() = default;

Time Route::serialization(std::int64_t bytes) const {
  if (bytes <= 0 || links.empty()) return 0;
  return static_cast<Time>(std::llround(static_cast<double>(bytes) / bytes_per_ns));
}

Topology::Topology(const ClusterSpec& spec)
    : num_devices_(spec.nodes * spec.devices_per_node), devices_per_node_(spec.devices_per_node) {
  if (spec.nodes < 1 || spec.devices_per_node < 1)
    throw std::invalid_argument("topology needs at least one node and one device per node");
  auto add = [&](int from, int to, const LinkSpec& l, bool with_latency) {
    if (!(l.bandwidth_GBps > 0.0)) throw std::invalid_argument("link bandwidth must be positive");
    links_.push_back(Link{from, to, l.bandwidth_GBps, with_latency ? us_to_ns(l.latency_us) : 0});
  };
  for (int node = 0; node < spec.nodes; ++node) {
    const int base = node * spec.devices_per_node;
    for (int a = 0; a < spec.devices_per_node; ++a)
      for (int b = 0; b < spec.devices_per_node; ++b)
        if (a != b) add(base + a, base + b, spec.intra_node, true);
  }
  if (spec.nodes > 1) {
    const int fabric = num_devices_;
    for (int d = 0; d < num_devices_; ++d) {
      add(d, fabric, spec.inter_node, true);
      add(fabric, d, spec.inter_node, false);
    }
  }
  graph_ = std::make_unique<Graph>(num_devices_ + 1);
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
  const int vertices = num_devices_ + 1;
  const auto& g = graph_->g;
  std::vector<double> weight(links_.size());
  for (int id = 0; id < static_cast<int>(links_.size()); ++id) {
    const Link& l = links_[id];
    weight[id] = static_cast<double>(l.latency) + static_cast<double>(bytes) / l.bytes_per_ns;
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
