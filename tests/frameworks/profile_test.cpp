// `bmpipe import profile`: per-layer costs from a CSV. The shipped example
// (configs/profiles/h200_llama2_7b.csv) holds the H200 measurements that
// configs/examples/h200_llama2_7b.yaml holds as YAML, so both must give the same run;
// every refusal names FILE:ROW:COL and the column.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "frameworks/profile/import.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace profile_test {

const std::string kHeader =
    "name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
    "output_bytes,param_bytes\n";

ImportedJob import(const std::string& csv) {
  return read_profile_csv(csv, "p.csv");
}

std::string error_of(const std::string& csv) {
  try {
    import(csv);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(ProfileImport, RowsBecomeLayerGroups) {
  const ImportedJob job = import(
      "# a comment\n\n"
      "name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
      "output_bytes,param_bytes,grad_bytes,optimizer_bytes,recompute_ms,selective_recompute_ms,"
      "selective_activation_bytes,full_recompute_ms,full_activation_bytes\r\n"
      "embedding,1,0.5,0,0.25,8192,4096,1000,1000,6000,,,,,\n"
      " \"decoder, big\" , 30 , 1.5 , 2.5 , 1e-3 , 900 , 100 , 2000 ,,,0.1,0.5,400,1.25,100\n");
  ASSERT_EQ(job.layers.size(), 2u);
  const LayerGroup& e = job.layers[0];
  EXPECT_EQ(e.name, "embedding");
  EXPECT_EQ(e.count, 1);
  EXPECT_DOUBLE_EQ(e.forward_ms, 0.5);
  EXPECT_DOUBLE_EQ(e.backward_weight_ms, 0.25);
  EXPECT_EQ(e.activation_bytes, 8192);
  EXPECT_EQ(e.grad_bytes, 1000);
  EXPECT_EQ(e.optimizer_bytes, 6000);
  EXPECT_FALSE(e.recompute[Recompute::full]);
  const LayerGroup& d = job.layers[1];
  EXPECT_EQ(d.name, "decoder, big");
  EXPECT_EQ(d.count, 30);
  EXPECT_DOUBLE_EQ(d.backward_weight_ms, 1e-3);
  EXPECT_EQ(d.grad_bytes, 0);  // empty cell: not given
  EXPECT_DOUBLE_EQ(d.recompute_ms, 0.1);
  ASSERT_TRUE(d.recompute[Recompute::selective]);
  EXPECT_DOUBLE_EQ(d.recompute[Recompute::selective]->recompute_ms, 0.5);
  EXPECT_EQ(d.recompute[Recompute::selective]->activation_bytes, 400);
  ASSERT_TRUE(d.recompute[Recompute::full]);
  EXPECT_DOUBLE_EQ(d.recompute[Recompute::full]->recompute_ms, 1.25);
  EXPECT_EQ(d.recompute[Recompute::full]->activation_bytes, 100);
  // The YAML loads, and the measured values arrive unchanged.
  const Config c =
      parse_config(imported_yaml(job, cluster_from_preset("h200", 2), "o.yaml"), "o.yaml");
  EXPECT_EQ(c.model.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(c.model.layers[1].backward_weight_ms, 1e-3);
  EXPECT_EQ(c.model.layers[1].name, "decoder, big");
  EXPECT_EQ(c.model.num_layers(), 31);
}

TEST(ProfileImport, ErrorsNameRowColumnAndColumnName) {
  struct Case {
    std::string csv, expected;
  };
  const std::string good = "decoder,2,1,1,1,10,5,5\n";
  const Case cases[] = {
      {kHeader + "decoder,2,abc,1,1,10,5,5\n",
       "p.csv:2:3: forward_ms: expected a number of milliseconds, got 'abc'"},
      {kHeader + good + "decoder,2,1,1,1,10.5,5,5\n",
       "p.csv:3:6: activation_bytes: expected a byte count in full digits, got '10.5'"},
      {kHeader + "decoder,2,1,1,1,-10,5,5\n", "p.csv:2:6: activation_bytes: must be at least 0"},
      {kHeader + "decoder,0,1,1,1,10,5,5\n", "p.csv:2:2: count: must be at least 1"},
      {kHeader + "decoder,2,90000000,1,1,10,5,5\n",
       "p.csv:2:3: forward_ms: must be at most 86400000 ms (a day), got 90000000"},
      {kHeader + "decoder,2,1,1,1,10,5\n", "p.csv:2: has 7 cells; the header has 8"},
      {kHeader + ",2,1,1,1,10,5,5\n", "p.csv:2:1: name: empty; the column is required"},
      {kHeader + "\"decoder,2,1,1,1,10,5,5\n", "p.csv:2:1: a quoted cell is never closed"},
      {"name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
       "output_bytes,param_bytes,flops\n" +
           good,
       "p.csv:1:9: flops: unknown column (expected: name, count, forward_ms"},
      {"name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
       "output_bytes,count\n",
       "p.csv:1:8: count: given twice, in columns 2 and 8"},
      {"name,count,forward_ms\n" + good, "p.csv:1: backward_input_ms: missing required column"},
      {"name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
       "output_bytes,param_bytes,full_recompute_ms\n",
       "p.csv:1:9: full_recompute_ms: comes with full_activation_bytes"},
      {"name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
       "output_bytes,param_bytes,full_recompute_ms,full_activation_bytes\n"
       "decoder,2,1,1,1,10,5,5,1,\n",
       "p.csv:2:10: full_activation_bytes: empty, while full_recompute_ms is given"},
      {"name,count,forward_ms,backward_input_ms,backward_weight_ms,activation_bytes,"
       "output_bytes,param_bytes,full_recompute_ms,full_activation_bytes\n"
       "decoder,2,1,1,1,10,5,5,1,11\n",
       "p.csv:2:10: full_activation_bytes: cannot exceed activation_bytes (10)"},
      {"# only a comment\n", "p.csv: no header row"},
      {kHeader, "p.csv:1: no layer rows after the header"},
      {kHeader + "decoder,60000,1,1,1,10,5,5\ndecoder,50000,1,1,1,10,5,5\n",
       "p.csv:3:2: count: the rows up to here hold 110000 layers"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.csv);
    EXPECT_EQ(e.rfind(c.expected, 0), 0u) << c.csv << "\n  got: " << e;
  }
}

// The example CSV and the example YAML hold the same measured layers: on the same cluster
// and layout they simulate to the same summary.
TEST(ProfileImport, TheShippedExampleMatchesTheYamlExample) {
  const test::ScratchDir dir;
  const std::string cluster =
      test::write_file(dir.file("cluster.yaml"),
                       "cluster:\n  nodes: 1\n  devices_per_node: 8\n"
                       "  device: {name: H200, memory_GiB: 140, reserved_GiB: 2}\n"
                       "  intra_node: {bandwidth_GBps: 450, latency_us: 5}\n");
  const std::string csv = std::string(BMPIPE_SOURCE_DIR) + "/configs/profiles/h200_llama2_7b.csv";
  const std::string out = dir.file("imported.yaml");
  const test::CliRun imported = test::run_cli("import profile '" + csv + "' --cluster '" + cluster +
                                              "' --pp 8 --microbatches 32 --out '" + out + "'");
  ASSERT_EQ(imported.code, 0) << imported.err;
  EXPECT_EQ(imported.out, "");
  const test::CliRun a = test::run_cli("simulate '" + out + "' --json");
  const test::CliRun b =
      test::run_cli("simulate '" + test::examples() + "h200_llama2_7b.yaml' --json");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["iteration_time_ms"], jb["iteration_time_ms"]);
  EXPECT_EQ(ja["devices"], jb["devices"]);
  EXPECT_EQ(ja["bubble_ratio"], jb["bubble_ratio"]);
}

}  // namespace profile_test
}  // namespace bmpipe
