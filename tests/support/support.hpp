#pragma once
// Shared by every test binary: small topologies, uniform engine inputs, a recording
// observer, schedule helpers, per-test scratch folders and a runner for the bmpipe
// executable. Tests include it as "support/support.hpp".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedules/registry.hpp"
#include "sim/simulate.hpp"
#include "support/result_text.hpp"

namespace bmpipe::test {

// ---- engine inputs -------------------------------------------------------------------------

/// Per-stage costs for a uniform pipeline, in ns and bytes.
struct Costs {
  Time f = 1, i = 1, w = 1;
  std::int64_t activation = 1;
  std::int64_t output = 0;  ///< 0: free communication
};

/// One node of `devices` devices joined by links of `latency_us` and `bandwidth_GBps`.
inline std::unique_ptr<Topology> one_node(int devices, double latency_us = 0.0,
                                          double bandwidth_GBps = 1e6) {
  return std::make_unique<Topology>(
      ClusterSpec{1, devices, LinkSpec{bandwidth_GBps, latency_us}, LinkSpec{}});
}

/// Every stage of `sch` costs `c`; rank r runs on device r of `topo`.
inline SimInput uniform_input(const Schedule& sch, const Topology& topo, const Costs& c) {
  SimInput in;
  in.topology = &topo;
  StageCost sc;
  sc.forward = c.f;
  sc.backward_input = c.i;
  sc.backward_weight = c.w;
  sc.activation_bytes = c.activation;
  sc.output_bytes = c.output;
  in.stages.assign(sch.num_stages, sc);
  for (int r = 0; r < sch.num_ranks; ++r) in.rank_device.push_back(r);
  return in;
}

/// Per stage, its gradient reduction in one piece: one bucket, ready when the stage's last
/// weight-gradient op ends (0: none).
inline std::vector<std::vector<GradBucket>> whole_stages(const std::vector<Time>& times) {
  std::vector<std::vector<GradBucket>> buckets;
  for (Time t : times) buckets.push_back({GradBucket{t, 1.0, 1.0}});
  return buckets;
}

/// Records everything an Observer is told.
struct Recorder : Observer {
  std::vector<OpRecord> ops;
  std::vector<TransferRecord> transfers;
  struct Mem {
    int rank;
    Time time;
    std::int64_t bytes;
  };
  std::vector<Mem> memory;
  std::vector<ReductionRecord> reductions;
  std::vector<CopyRecord> copies;
  std::vector<SimResult> results;
  void on_copy(const CopyRecord& c) override { copies.push_back(c); }
  void on_op(const OpRecord& r) override { ops.push_back(r); }
  void on_transfer(const TransferRecord& t) override { transfers.push_back(t); }
  void on_memory(int rank, Time t, std::int64_t b) override { memory.push_back({rank, t, b}); }
  void on_reduction(const ReductionRecord& r) override { reductions.push_back(r); }
  void on_result(const SimResult& r) override { results.push_back(r); }
  const OpRecord* find(int rank, const Op& op) const {
    for (const auto& r : ops)
      if (r.rank == rank && r.op == op) return &r;
    return nullptr;
  }
};

// ---- schedules -----------------------------------------------------------------------------

/// Two ranks holding two stages each (rank 0 stages 0 and 2, rank 1 stages 1 and 3), one
/// micro-batch. At F = I = W = 1 (B = 2) and free communication, by hand:
///   rank 0: F0 [0,1]  F2 [2,3]  B2 [6,8]   B0 [10,12]
///   rank 1: F1 [1,2]  F3 [3,4]  B3 [4,6]   B1 [8,10]
/// The gradient-reduction tests (sim, trace, tail) are worked out on this run.
inline Schedule two_chunk_schedule() {
  Schedule s;
  s.name = "two-chunks";
  s.num_ranks = 2;
  s.num_stages = 4;
  s.num_microbatches = 1;
  s.stage_rank = {0, 1, 0, 1};
  s.ops = {{Op::f(0, 0), Op::f(2, 0), Op::b(2, 0), Op::b(0, 0)},
           {Op::f(1, 0), Op::f(3, 0), Op::b(3, 0), Op::b(1, 0)}};
  return s;
}

/// Ranks candidates the way the experiment layer does, with the real engine: every stage
/// costs `c`, on one node with a device per rank.
inline ScheduleEvaluator engine_evaluator(const Costs& c = {}) {
  return [c](const Schedule& s) -> std::optional<std::int64_t> {
    const auto topo = one_node(s.num_ranks);
    const SimResult r = simulate(uniform_input(s, *topo, c), s);
    if (!r.ok) return std::nullopt;
    return r.iteration_time;
  };
}

/// The built-in schedule `name`, with unit costs (F = I = W = 1, free communication) for
/// the generators that pick among candidates, ranked by the engine.
inline Schedule generate(const char* name, int p, int m, int v = 1) {
  return find_schedule(name)->generate(ScheduleParams{p, m, v, {}, engine_evaluator()});
}

/// Idle time of a device between its own first op and its last.
inline Time span_idle(const DeviceResult& d) {
  return d.last_end - d.first_start - d.busy;
}

inline Time max_span_idle(const SimResult& r) {
  Time t = 0;
  for (const auto& d : r.devices) t = std::max(t, span_idle(d));
  return t;
}

inline int max_inflight(const SimResult& r) {
  int n = 0;
  for (const auto& d : r.devices) n = std::max(n, d.peak_inflight);
  return n;
}

// ---- files and the executable --------------------------------------------------------------

/// A folder of the running test's own, removed at the end: ctest runs every test as its own
/// process, in parallel, so no two tests may share a file name.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "bmpipe_";
    if (info) name += std::string(info->test_suite_name()) + "." + info->name() + "_";
    std::replace(name.begin(), name.end(), '/', '_');
    std::string templ = (std::filesystem::temp_directory_path() / (name + "XXXXXX")).string();
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

/// The names of the entries of `dir`, sorted.
inline std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// What one run of the executable did.
struct CliRun {
  int code = -1;  ///< exit code; -1 if it did not exit normally (signal)
  std::string out;
  std::string err;
  std::string all() const { return out + err; }
};

/// Runs `bmpipe ARGS` (ARGS as a shell would split them), capturing stdout and stderr apart.
inline CliRun run_cli(const std::string& args) {
  ScratchDir dir;
  const std::string out = dir.file("stdout"), err = dir.file("stderr");
  const std::string cmd =
      std::string(BMPIPE_BINARY) + " " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// The JSON `bmpipe ARGS` prints, its exit code expected to be 0.
inline nlohmann::json run_json(const std::string& args) {
  const CliRun r = run_cli(args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out);
}

/// The row called `name` of `bmpipe cost --json`'s "layers".
inline const nlohmann::json& cost_layer(const nlohmann::json& cost, const std::string& name) {
  for (const auto& l : cost["layers"])
    if (l["name"] == name) return l;
  throw std::runtime_error("no layer " + name);
}

/// The examples folder, ending in '/'.
inline std::string examples() {
  return std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/";
}

/// The examples' tiny.yaml: 8 unit layers on 4 ranks of one node.
inline const std::string kTiny = examples() + "tiny.yaml";
/// The examples folder, ending in '/'.
inline const std::string kExamples = examples();

/// Units, in the engine's ns and bytes.
inline constexpr Time kMs = 1'000'000;
inline constexpr std::int64_t kGiB = std::int64_t{1} << 30;

/// `bmpipe search ARGS --json --quiet`, which must exit 0, without its wall-clock seconds
/// (the one field that differs by run).
inline nlohmann::json search_json(const std::string& args) {
  const CliRun r = run_cli("search " + args + " --json --quiet");
  EXPECT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  j["search"].erase("wall_s");
  return j;
}

/// A search document's winner as one line (tp, pp, dp, vpp, mbs, schedule, iteration ms),
/// to compare two searches' answers.
inline std::string search_winner(const nlohmann::json& j) {
  const nlohmann::json& l = j["layouts"][0];
  EXPECT_TRUE(l["fits"].get<bool>());
  std::ostringstream s;
  s << l["tp"] << " " << l["pp"] << " " << l["dp"] << " " << l["vpp"] << " "
    << l["micro_batch_size"] << " " << l["schedule"] << " " << l["iteration_time_ms"];
  return s.str();
}

/// The search tests' medium space: GPT-3's layer cut to 24 layers on 64 A100s
/// (tests/data/search_gpt3_24_layers.yaml), with the dimensions that give it 28 layouts,
/// some of them skipped by the bound. Searches of the whole GPT-3 example take seconds
/// each, and twenty times that under the sanitizers; this one takes about 0.2 s.
inline std::string medium_search_args() {
  return std::string(BMPIPE_TEST_DATA_DIR) +
         "/search_gpt3_24_layers.yaml --tp 4,8 --pp 4,8 --micro-batch-size 1,2";
}

inline const std::string kMedium = medium_search_args();

/// The README's worked job: the shipped Megatron-LM script imported onto 16 H100s
/// (configs/clusters/h100_2x8.yaml), written as job.yaml in `dir`; returns its path.
inline std::string imported_13b_job(const ScratchDir& dir) {
  const std::string job = dir.file("job.yaml");
  const CliRun r =
      run_cli("import megatron " + examples() + "llama2_13b_megatron_args.txt --cluster " +
              std::string(BMPIPE_SOURCE_DIR) + "/configs/clusters/h100_2x8.yaml --out " + job);
  EXPECT_EQ(r.code, 0) << r.err;
  return job;
}

}  // namespace bmpipe::test
