// cluster.scale_up_domain (issue 19, item 4): a high-bandwidth domain of several nodes
// (GB200 NVL72, an Ascend SuperPoD) in which tp and ep groups run on the intra_node link,
// the device graph's switch between the nodes of one domain, and the bad values.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;

// Lines: cluster.nodes on 2, cluster.device on 3, training.tp on 9.
std::string tp16(const std::string& preset, int nodes, const std::string& extra = "") {
  return "cluster:\n  nodes: " + std::to_string(nodes) + "\n  device: {preset: " + preset + "}\n" +
         extra +
         "model: {preset: llama3-70b}\n"
         "training:\n"
         "  schedule: 1f1b\n"
         "  pp: 1\n"
         "  tp: 16\n"
         "  seq_length: 4096\n"
         "  micro_batch_size: 1\n"
         "  global_batch_size: 8\n";
}

TEST(ScaleUpDomain, Tp16InsideAnNvl72DoesNotCrossNodes) {
  // 4 GB200 trays of 4 GPUs = 16 GPUs, all in the rack's NVLink domain (72, capped at 16).
  const Config gb = parse_config(tp16("gb200", 4), "gb200.yaml");
  EXPECT_EQ(gb.cluster.devices_per_node, 4);
  EXPECT_EQ(gb.cluster.scale_up_domain, 16);
  EXPECT_FALSE(prepare(gb)->analytic->settings.tp_crosses_nodes);
  // 2 HGX H100 nodes of 8: the node is the domain, a tp group of 16 leaves it.
  const Config h = parse_config(tp16("h100-sxm", 2), "h100.yaml");
  EXPECT_EQ(h.cluster.domain(), 8);
  EXPECT_TRUE(prepare(h)->analytic->settings.tp_crosses_nodes);
}

TEST(ScaleUpDomain, TheTpAllReduceRunsAsInsideOneNode) {
  // Four nodes of 4 in one domain cost the tp all-reduces as one node of 16 does.
  const auto domain = prepare(parse_config(tp16("gb200", 4), "a.yaml"));
  const auto node = prepare(parse_config(tp16("gb200", 1, "  devices_per_node: 16\n"), "b.yaml"));
  // ... and a domain of one tray each puts them on the 50 GB/s NICs.
  const auto split = prepare(parse_config(tp16("gb200", 4, "  scale_up_domain: 4\n"), "c.yaml"));
  EXPECT_TRUE(split->analytic->settings.tp_crosses_nodes);
  const auto all_reduce = [](const LayerCost& c) {
    double s = 0;
    for (const auto& op : c.ops)
      if (op.name.find("all_reduce") != std::string::npos) s += op.forward_s;
    return s;
  };
  const double in_domain = all_reduce(domain->analytic->decoder);
  EXPECT_GT(in_domain, 0.0);
  EXPECT_DOUBLE_EQ(in_domain, all_reduce(node->analytic->decoder));
  // NVLink 5's 900 GB/s against the NIC's 50: the split domain is more than 10x slower.
  EXPECT_GT(all_reduce(split->analytic->decoder), 10 * in_domain);
}

TEST(ScaleUpDomain, TheDeviceGraphSwitchesBetweenNodesOfOneDomain) {
  // 4 nodes of 4, NVLink-like 900 GB/s / 5 us inside, a 50 GB/s / 10 us NIC outside.
  ClusterSpec spec{4, 4, LinkSpec{900, 5}, LinkSpec{50, 10}};
  spec.scale_up_domain = 8;
  const Topology topo(spec);
  // Device 0 to 5: another node of the same domain: up to the switch and down, 900 GB/s
  // (= 900 bytes/ns), 5 us once.
  const Route in = topo.route(0, 5, 1 << 20);
  EXPECT_EQ(in.links.size(), 2u);
  EXPECT_DOUBLE_EQ(in.bytes_per_ns, 900);
  EXPECT_EQ(in.latency, 5000);
  // Inside a node: the direct mesh link.
  EXPECT_EQ(topo.route(0, 1, 1 << 20).links.size(), 1u);
  // Device 0 to 9: another domain, through the fabric at 50 GB/s, 10 us.
  const Route out = topo.route(0, 9, 1 << 20);
  EXPECT_DOUBLE_EQ(out.bytes_per_ns, 50);
  EXPECT_EQ(out.latency, 10000);
  EXPECT_EQ(topo.domain_of(7), 0);
  EXPECT_EQ(topo.domain_of(8), 1);
  // Without a domain, 0 to 5 leaves through the NIC as before.
  const Topology plain(ClusterSpec{4, 4, LinkSpec{900, 5}, LinkSpec{50, 10}});
  EXPECT_DOUBLE_EQ(plain.route(0, 5, 1 << 20).bytes_per_ns, 50);
  EXPECT_EQ(plain.links().size(), 4u * 4 * 3 + 2 * 16);
  EXPECT_EQ(topo.links().size(), 4u * 4 * 3 + 2 * 16 + 2 * 16);
}

TEST(ScaleUpDomain, BadDomainsNameTheKeyAndLine) {
  struct BadDomain {
    int nodes;
    std::string domain, expected;
  };
  const BadDomain cases[] = {
      // gb200: 4 devices a node.
      {4, "2",
       "expected at least devices_per_node = 4 devices (a domain holds whole nodes), got 2"},
      {4, "6", "expected a multiple of devices_per_node = 4 (a domain holds whole nodes), got 6"},
      {4, "12", "expected a divisor of nodes x devices_per_node = 4 x 4 = 16 devices, got 12"},
  };
  for (const BadDomain& c : cases) {
    const ConfigError e =
        config_error(tp16("gb200", c.nodes, "  scale_up_domain: " + c.domain + "\n"));
    EXPECT_EQ(e.key(), "cluster.scale_up_domain");
    EXPECT_EQ(e.line(), 4);
    EXPECT_EQ(e.message(), c.expected);
  }
  // The preset's 72 does not divide 20 trays x 4 = 80 GPUs: named, with the way out.
  const ConfigError e = config_error(tp16("gb200", 20));
  EXPECT_EQ(e.key(), "cluster.scale_up_domain");
  EXPECT_EQ(e.line(), 3);
  EXPECT_TRUE(has(e.message(), "gb200 preset's domain of 72 devices"));
  EXPECT_TRUE(has(e.message(), "expected a divisor of nodes x devices_per_node = 20 x 4 = 80"));
  EXPECT_TRUE(has(e.message(), "give cluster.scale_up_domain"));
}

// Issue 41: the Ascend 910C's domain message names what the user gave. The preset's domain
// is a CloudMatrix384 SuperPoD, 384 NPUs of 48 nodes of 8 (arXiv 2506.12708, sec. 3); 100
// nodes of 8 = 800 NPUs are not whole SuperPoDs.
TEST(ScaleUpDomain, The910cDomainMessageNamesTheNodesGiven) {
  const ConfigError e = config_error(tp16("ascend-910c", 100));
  EXPECT_EQ(e.key(), "cluster.scale_up_domain");
  EXPECT_EQ(e.line(), 3);
  EXPECT_TRUE(has(e.message(), "absent, so the ascend-910c preset's domain of 384 devices"));
  EXPECT_TRUE(has(e.message(), "expected a divisor of nodes x devices_per_node = 100 x 8 = 800"));
  EXPECT_TRUE(has(e.message(), "give cluster.scale_up_domain"));
}

TEST(ScaleUpDomain, TheCliExitsTwoWithFileLineAndKey) {
  test::ScratchDir dir;
  const std::string yaml =
      test::write_file(dir.file("bad.yaml"), tp16("gb200", 4, "  scale_up_domain: 12\n"));
  const test::CliRun r = test::run_cli("simulate '" + yaml + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "bad.yaml:4"));
  EXPECT_TRUE(has(r.err, "cluster.scale_up_domain"));
}

}  // namespace
}  // namespace bmpipe
