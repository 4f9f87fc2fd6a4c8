#include "api/search.hpp"

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <utility>

#include "api/contracts.hpp"
#include "api/errors.hpp"
#include "sim/time.hpp"

namespace bmpipe::api {

void check_search_request(const SearchRequest& r) {
  if (r.max_evals < 1) throw RequestError("--max-evals", "must be at least 1");
  if (r.threads < 0) throw RequestError("--threads", "must be 0 or more");
  if (r.memory_limit_GiB && (!(*r.memory_limit_GiB > 0) || !std::isfinite(*r.memory_limit_GiB) ||
                             *r.memory_limit_GiB > 1e6))
    throw RequestError("--memory-limit-GiB", "must be a positive number of GiB");
}

PlannerEffort planner_effort(const std::string& name) {
  if (name == "off") return PlannerEffort::off;
  if (name == "quick") return PlannerEffort::quick;
  if (name == "full") return PlannerEffort::full;
  throw RequestError("--planner", "unknown value '" + name + "' (off, quick, full)");
}

SearchSetup prepare_search(Config config, const SearchRequest& request) {
  check_search_request(request);
  SearchSetup s;
  s.request = request;
  s.options.seed = request.seed;
  s.options.max_evals = request.max_evals;
  s.options.threads = 1;  // parallelism is across layouts
  if (request.memory_limit_GiB)
    s.options.memory_limit_bytes =
        static_cast<std::int64_t>(std::llround(*request.memory_limit_GiB * 1073741824.0));
  s.layouts = enumerate_layouts(config, request.space, &s.rejected);
  s.config = std::move(config);
  return s;
}

void evaluate_layouts(const SearchSetup& s, std::size_t begin, std::size_t end,
                      std::vector<LayoutResult>& out, const std::function<void()>& done) {
  // Never more threads than the process may run (mpirun may bind it to fewer cores).
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads;
  tbb::task_arena arena(threads > 0 ? std::min(threads, cores) : cores);
  std::mutex m;
  arena.execute([&] {
    tbb::parallel_for(begin, end, [&](std::size_t i) {
      LayoutResult r = evaluate_layout(s.config, s.layouts[i], s.request.effort, s.options);
      const std::lock_guard<std::mutex> lock(m);
      out[i] = std::move(r);
      if (done) done();
    });
  });
}

SearchReport rank_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                         double wall_s) {
  SearchReport report;
  report.processes = processes;
  report.wall_s = wall_s;
  for (const LayoutResult& r : results) report.evaluations += r.evaluations;
  for (const LayoutResult& r : s.rejected) results.push_back(r);
  for (const LayoutResult& r : results)
    if (!r.rejected.empty()) ++report.rejected_by[r.filter];
  rank_layouts(results);
  report.layouts = std::move(results);
  return report;
}

namespace {

LayoutResult layout_from_json(const nlohmann::json& j) {
  LayoutResult r;
  r.layout = Layout{j.at("tp"),      j.at("pp"), j.at("dp"), j.at("vpp"), j.at("micro_batch_size"),
                    j.at("schedule")};
  r.microbatches = j.at("microbatches");
  r.fits = j.at("fits");
  if (!j.at("rejected").is_null()) r.rejected = j.at("rejected");
  if (j.contains("filter")) r.filter = j.at("filter");
  if (!j.at("iteration_time_ms").is_null()) {
    // The exact ns travel as an integer beside the ms for the round trip.
    r.iteration_time = j.at("iteration_time_ns");
    r.tokens_per_s = j.at("tokens_per_s");
    r.mfu = j.at("mfu");
    r.tflops_per_device = j.at("tflops_per_device");
    r.bubble_ratio = j.at("bubble_ratio");
    r.max_peak_bytes = j.at("max_peak_memory_bytes");
    r.capacity_bytes = j.at("capacity_bytes");
    r.plan.partition = j.at("partition").get<std::vector<int>>();
    for (const auto& m : j.at("layer_recompute"))
      r.plan.recompute.push_back(*parse_recompute(m.get<std::string>()));
  }
  r.evaluations = j.at("evaluations");
  return r;
}

}  // namespace

std::string encode_result(const LayoutResult& r) {
  nlohmann::json j = layout_json(r);
  j["iteration_time_ns"] = r.iteration_time;
  j["fits"] = r.fits;  // the raw flag (layout_json folds rejection into it)
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LayoutResult decode_result(const std::string& text) {
  return layout_from_json(nlohmann::json::parse(text));
}

nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const std::function<void()>& done) {
  const auto start = std::chrono::steady_clock::now();
  const SearchSetup s = prepare_search(config, request);
  std::vector<LayoutResult> results(s.layouts.size());
  evaluate_layouts(s, 0, s.layouts.size(), results, done);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json document = search_document(rank_search(s, std::move(results), 1, wall));
  document["bmpipe"] = provenance(config.file);
  return document;
}

}  // namespace bmpipe::api
