// search --out writes the job it ranked: keys the layout's own config changes
// (planner/layout_search.cpp layout_config) are written with it, so that the file loads and
// simulates to the ranked time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace {

// The tp overlap of a tp-2 config: a tp-1 layout runs without it (check_config refuses
// tp_comm_overlap at tp 1, as Megatron-LM does), and the written file says so.
TEST(SearchOut, ATp1WinnerOfATpOverlapConfigIsWrittenWithoutTheOverlap) {
  const test::ScratchDir dir;
  const std::string config = test::write_file(
      dir.file("overlap.yaml"),
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: a100-80g}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, tp: 2, pp: 2, seq_length: 1024, micro_batch_size: 1,\n"
      "           global_batch_size: 16, sequence_parallel: true, tp_comm_overlap: true}\n");
  const std::string out = dir.file("best.yaml");
  const nlohmann::json j =
      test::search_json("'" + config +
                        "' --planner off --tp 1 --pp 2 --micro-batch-size 1 --schedules 1f1b "
                        "--out '" +
                        out + "'");
  const nlohmann::json& best = j["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>()) << best.dump();
  const Config written = load_config(out);
  EXPECT_EQ(written.training.tp, 1);
  EXPECT_FALSE(written.training.tp_comm_overlap);
  const test::CliRun sim = test::run_cli("simulate '" + out + "' --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_EQ(nlohmann::json::parse(sim.out)["iteration_time_ms"], best["iteration_time_ms"]);
}

}  // namespace
}  // namespace bmpipe
