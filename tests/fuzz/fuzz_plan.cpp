// libFuzzer target: YAML text -> Config or ConfigError, then what `bmpipe plan CONFIG
// --max-evals 10 --threads 1 --out FILE` does (with a small exhaustive baseline): plan,
// export, and the config written back with the plan, which must load and, simulated,
// reproduce the planner's iteration time (write_config.hpp promises it). Shares the
// config corpus and dictionary with fuzz_config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "experiment/write_config.hpp"
#include "fuzz_run.hpp"
#include "planner/planner.hpp"

namespace {

using namespace bmpipe;

constexpr const char* kName = BMPIPE_SOURCE_DIR "/configs/examples/fuzz-input.yaml";

Overrides small() {
  Overrides o;
  o.limits = fuzz::small_limits();
  return o;
}

void plan_and_write_back(const Experiment& e, const std::string& text) {
  PlannerOptions options;
  options.schedule = e.config.training.schedule;
  options.vpp = effective_vpp(*find_schedule(options.schedule), e.config.training.vpp);
  options.memory_limit_bytes = e.capacity_bytes;
  if (options.memory_limit_bytes <= 0) return;  // the CLI refuses it as usage
  options.threads = 1;
  options.max_evals = 10;
  options.stall_evals = 5;
  options.exhaustive_limit = 100;
  PlanOutcome outcome;
  try {
    outcome = plan_pipeline(e, options);
  } catch (const ConfigError&) {
    return;
  }
  const PlanRun& best = outcome.best;
  if (!best.fits()) return;
  if (const std::string why = check_plan(e, best.plan, best.schedule.num_stages); !why.empty())
    fuzz::broken("the planner chose a plan check_plan refuses: " + why);
  (void)export_layout(e, best.plan, best.schedule);

  const ConfigEdits edits{outcome.schedule,
                          best.schedule.num_ranks,
                          best.schedule.chunks_per_device(),
                          best.schedule.num_microbatches,
                          best.plan.partition,
                          best.plan.recompute,
                          {},
                          {},
                          {}};
  const std::string written = config_with_edits(text, kName, kName, edits, "fuzz");
  Config again;
  try {
    again = parse_config(written, kName, small());
  } catch (const ConfigError& err) {
    fuzz::broken(std::string("the config written with the plan does not load: ") + err.what() +
                 "\n" + written);
  }
  const std::shared_ptr<const Experiment> e2 = prepare(again);
  const Schedule schedule = make_schedule(*e2);
  const Plan plan = config_plan(*e2, schedule.num_stages);
  const SimResult r = simulate(assemble(*e2, plan, schedule), schedule);
  if (!r.ok || r.iteration_time != best.result.iteration_time)
    fuzz::broken("the written config simulates to " + std::to_string(r.iteration_time) +
                 " ns, the planner said " + std::to_string(best.result.iteration_time) + " ns\n" +
                 written);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Config config;
  try {
    config = parse_config(text, kName, small());
  } catch (const ConfigError&) {
    return 0;
  }
  std::shared_ptr<const Experiment> e;
  try {
    e = prepare(config);
  } catch (const ConfigError&) {
    return 0;
  }
  plan_and_write_back(*e, text);
  return 0;
}
