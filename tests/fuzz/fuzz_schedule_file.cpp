// libFuzzer target: schedule CSV text -> Schedule or ScheduleFileError. A schedule that
// parses must be valid, survive a round trip through schedule_to_csv unchanged, and run:
// on unit costs over a device graph with links inside and between nodes, and the way
// `bmpipe simulate tiny.yaml --schedule-file FILE` runs it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_run.hpp"
#include "schedules/schedule_file.hpp"
#include "schedules/validate.hpp"

namespace {

using namespace bmpipe;

// Unit costs with transfers that take time, so that links queue; four devices per node
// so that both intra- and inter-node routes appear (and, with one rank on a node, a NIC
// shared by two senders, which takes the ordered engine).
SimInput unit_input(const Schedule& s, const Topology& topology) {
  SimInput in;
  in.topology = &topology;
  in.stages.assign(s.num_stages, StageCost{1000, 1000, 1000, 0, 10, std::nullopt, 1000});
  for (int r = 0; r < s.num_ranks; ++r) in.rank_device.push_back(r);
  in.static_bytes.assign(s.num_ranks, 100);
  in.capacity_bytes.assign(s.num_ranks, 150);
  in.tail_time.assign(s.num_ranks, 500);
  return in;
}

const Config& tiny() {
  static const Config config = load_config(BMPIPE_SOURCE_DIR "/configs/examples/tiny.yaml");
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Schedule s;
  try {
    s = parse_schedule_csv(text, "fuzz-input.csv", "fuzz");
  } catch (const ScheduleFileError&) {
    return 0;
  }
  if (const auto issue = validate_schedule(s))
    fuzz::broken("the parser accepted an invalid schedule: " + issue->message);
  const std::string csv = schedule_to_csv(s);
  const Schedule again = parse_schedule_csv(csv, "round-trip.csv", "fuzz");
  if (again.num_ranks != s.num_ranks || again.num_stages != s.num_stages ||
      again.num_microbatches != s.num_microbatches || again.stage_rank != s.stage_rank ||
      again.ops != s.ops)
    fuzz::broken("schedule_to_csv does not read back as the same schedule:\n" + csv);
  // The parser bounds the ops by the text, so the run is as small as the input.
  const int per_node = std::min(s.num_ranks, 4);
  const Topology topology(ClusterSpec{(s.num_ranks + per_node - 1) / per_node, per_node,
                                      LinkSpec{1.0, 100}, LinkSpec{0.5, 700}});
  RunInfo info;
  info.schedule = s.name;
  info.pp = s.num_ranks;
  info.vpp = s.chunks_per_device();
  info.microbatches = s.num_microbatches;
  fuzz::run_all_ways(unit_input(s, topology), s, info, /*must_run=*/false);

  // As the CLI does it (cli/simulate_cmd.cpp): the file sets pp, vpp and micro-batches.
  Config config = tiny();
  Overrides o;
  o.pp = s.num_ranks;
  o.vpp = s.num_stages % s.num_ranks == 0 ? s.chunks_per_device() : 1;
  o.microbatches = s.num_microbatches;
  try {
    apply_overrides(config, o);
    const std::shared_ptr<const Experiment> e = prepare(config);
    const Plan plan = config_plan(*e, s.num_stages);
    const SimInput input = assemble(*e, plan, s);
    fuzz::run_all_ways(input, s, make_run_info(*e, plan, s), /*must_run=*/false);
  } catch (const ConfigError&) {
  }
  return 0;
}
