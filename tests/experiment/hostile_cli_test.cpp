// The fuzzer's findings through the executable: each exits 2 with FILE:LINE: KEY on stderr,
// where it used to die of a signal, hang or print nonsense with exit 0.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::has;
using test::kUnit;
using test::with;

struct Case {
  const char* name;
  std::string yaml;
  std::string args;      // after CONFIG
  std::string expected;  // on stderr, after the file name
};

TEST(HostileCli, EveryFindingExitsTwoNamingTheKey) {
  const test::ScratchDir dir;
  const std::string two_nodes =
      with("  nodes: 1\n", "  nodes: 2\n  inter_node: {bandwidth_GBps: 10, latency_us: 1e300}\n");
  const Case cases[] = {
      {"mb", with("microbatches: 8", "microbatches: 10000000"), "", ":19: training.microbatches:"},
      {"layers", with("forward_ms: 0.5", "forward_ms: 1e13"), "",
       ":10: model.layers[0].forward_ms:"},
      {"latency", two_nodes, "", ":3: cluster.inter_node.latency_us:"},
      {"bandwidth", with("bandwidth_GBps: 100", "bandwidth_GBps: 1e-320"), "",
       ":5: cluster.intra_node.bandwidth_GBps:"},
      {"capacity", with("memory_GiB: 1", "memory_GiB: -1"), "", ":4: cluster.device.memory_GiB:"},
      {"pptp", with("  pp: 4\n", "  pp: 65536\n  tp: 65536\n"), "", ":18: training.pp:"},
      {"partition", with("  pp: 4\n", "  pp: 4\n  partition: [2147483647, 2147483647, 5, 5]\n"), "",
       ":19: training.partition:"},
      {"overlap", with("  pp: 4\n", "  pp: 4\n  overlap_factor: 1e308\n"), "",
       ":19: training.overlap_factor:"},
      {"dup", with("  pp: 4\n", "  pp: 4\n  pp: 2\n"), "", ":19: training.pp: given twice"},
      {"bignode",
       with("  devices_per_node: 4\n", "  devices_per_node: 4096\n",
            with("count: 8", "count: 4096", with("  pp: 4\n", "  pp: 4096\n"))),
       "", ":3: cluster.devices_per_node:"},
      {"cli_mb", kUnit, "--microbatches 2147483647",
       ": training.microbatches (from the command line):"},
      {"empty", "", "", ":1: the file is empty"},
  };
  for (const Case& c : cases) {
    const std::string path = test::write_file(dir.file(std::string(c.name) + ".yaml"), c.yaml);
    const test::CliRun r = test::run_cli("simulate " + path + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.all();
    EXPECT_TRUE(has(r.err, path + c.expected)) << c.name;
    EXPECT_TRUE(r.out.empty()) << c.name << ": " << r.out;
  }
}

TEST(HostileCli, FilesThatAreNotFiles) {
  const test::ScratchDir dir;
  // A directory as the config, and as the HF config.json.
  const test::CliRun d = test::run_cli("simulate " + dir.path().string());
  EXPECT_EQ(d.code, 2) << d.all();
  EXPECT_TRUE(has(d.err, "is a directory")) << d.err;
  const std::string hf = test::write_file(
      dir.file("hf.yaml"),
      "cluster: {nodes: 1, devices_per_node: 2, device: {preset: h200}}\n"
      "model: {hf_config: .}\ntraining: {pp: 2, microbatches: 4, seq_length: 128}\n");
  const test::CliRun h = test::run_cli("simulate " + hf);
  EXPECT_EQ(h.code, 2) << h.all();
  EXPECT_TRUE(has(h.err, hf + ":2: model.hf_config: ")) << h.err;
  // A schedule file whose micro-batch id would size a table of a billion entries.
  const std::string csv = test::write_file(dir.file("s.csv"), "0F0,0F999999999,0B0\n");
  const test::CliRun s =
      test::run_cli("simulate " + test::examples() + "tiny.yaml --schedule-file " + csv);
  EXPECT_EQ(s.code, 2) << s.all();
  EXPECT_TRUE(has(s.err, csv + ":1:5: micro-batch 999999999")) << s.err;
}

}  // namespace
}  // namespace bmpipe
