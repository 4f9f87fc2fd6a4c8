#pragma once
// For tests that start from a Config: the same parse -> prepare -> assemble path the CLI
// takes, in one call.
#include <memory>

#include "experiment/experiment.hpp"

namespace bmpipe::test {

/// Everything one run of a config needs, built the way `bmpipe simulate` builds it.
struct Prepared {
  std::shared_ptr<const Experiment> experiment;
  Schedule schedule;
  Plan plan;
  SimInput input;  ///< points at experiment->topology
  RunInfo info;
};

inline Prepared prepare_run(const Config& config) {
  Prepared p;
  p.experiment = prepare(config);
  p.schedule = make_schedule(*p.experiment);
  p.plan = config_plan(*p.experiment, p.schedule.num_stages);
  p.input = assemble(*p.experiment, p.plan, p.schedule);
  p.info = make_run_info(*p.experiment, p.plan, p.schedule);
  return p;
}

}  // namespace bmpipe::test
