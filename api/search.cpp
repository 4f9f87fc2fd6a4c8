#include "api/search.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
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
  if (r.layout_evals < 1) throw RequestError("--layout-evals", "must be at least 1");
  if (r.max_evals && *r.max_evals < 1) throw RequestError("--max-evals", "must be at least 1");
  if (r.time_limit_s && !(*r.time_limit_s > 0 && std::isfinite(*r.time_limit_s)))
    throw RequestError("--time-limit-s", "must be greater than 0 seconds");
  if (!(r.margin_GiB >= 0) || !std::isfinite(r.margin_GiB))
    throw RequestError("--margin-GiB", "must be 0 or more GiB");
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
  s.options.max_evals = request.layout_evals;
  s.options.threads = 1;  // parallelism is across layouts
  // As plan's: the limit (the device's capacity unless --memory-limit-GiB) less the margin.
  if (request.memory_limit_GiB || request.margin_GiB > 0) {
    const double gib = request.memory_limit_GiB.value_or(config.device.memory_GiB);
    s.options.memory_limit_bytes =
        static_cast<std::int64_t>(std::llround((gib - request.margin_GiB) * 1073741824.0));
    if (s.options.memory_limit_bytes <= 0)
      throw RequestError("--margin-GiB", "leaves no memory below the limit");
  }
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

namespace {

LayoutResult cut(const Layout& l, const std::string& filter, const std::string& why) {
  LayoutResult r;
  r.layout = l;
  r.filter = filter;
  r.rejected = why;
  return r;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

SearchRun apply_budgets(const SearchSetup& s, std::vector<std::optional<LayoutResult>> results) {
  SearchRun run;
  std::int64_t spent = 0;
  bool over = false, timed_out = false;
  const std::optional<std::int64_t>& budget = s.request.max_evals;
  for (std::size_t i = 0; i < s.layouts.size(); ++i) {
    std::optional<LayoutResult>& r = results.at(i);
    if (budget && !over && r && spent + r->evaluations > *budget) over = true;
    if (budget && over) {
      r = cut(s.layouts[i], "evaluation limit",
              "not planned: --max-evals " + std::to_string(*budget) + " spent (" +
                  std::to_string(spent) + " evaluations before it)");
    } else if (!r) {
      timed_out = true;
      r = cut(
          s.layouts[i], "time limit",
          "not planned: --time-limit-s " + number(s.request.time_limit_s.value_or(0)) + " spent");
    } else {
      spent += r->evaluations;
    }
    run.results.push_back(std::move(*r));
  }
  run.stopped_by = timed_out ? "time limit" : over ? "evaluation limit" : "done";
  return run;
}

SearchRun evaluate_search(
    const SearchSetup& s, const std::vector<std::optional<LayoutResult>>& known,
    const std::function<void(std::size_t, const LayoutResult&, const SearchProgress&)>& done) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const std::size_t n = s.layouts.size();
  std::vector<std::optional<LayoutResult>> results(n);
  for (std::size_t i = 0; i < std::min(n, known.size()); ++i) results[i] = known[i];
  // Under --max-evals: the first layout (in enumeration order) that the budget cuts; no
  // later layout need start. Found by walking the finished prefix as results come in.
  std::atomic<std::size_t> cut_from{n};
  std::size_t prefix = 0;
  std::int64_t prefix_evals = 0;
  SearchProgress progress;
  progress.total = n;
  std::mutex m;
  const auto account = [&] {  // under m
    while (prefix < n && results[prefix] && cut_from.load() == n) {
      prefix_evals += results[prefix]->evaluations;
      if (s.request.max_evals && prefix_evals > *s.request.max_evals) cut_from = prefix;
      ++prefix;
    }
  };
  for (std::size_t i = 0; i < n; ++i)
    if (results[i]) {
      ++progress.done;
      progress.evaluations += results[i]->evaluations;
      const LayoutResult& r = *results[i];
      if (r.rejected.empty() && r.fits && r.iteration_time > 0 &&
          (!progress.best || r.iteration_time < *progress.best))
        progress.best = r.iteration_time;
    }
  account();
  // Never more threads than the process may run (mpirun may bind it to fewer cores).
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads;
  tbb::task_arena arena(threads > 0 ? std::min(threads, cores) : cores);
  arena.execute([&] {
    // One layout per task, taken in enumeration order as far as the scheduler allows, so
    // the budget's prefix fills early.
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, n, 1),
        [&](const tbb::blocked_range<std::size_t>& range) {
          for (std::size_t i = range.begin(); i != range.end(); ++i) {
            {
              const std::lock_guard<std::mutex> lock(m);
              if (results[i] || i >= cut_from.load()) continue;
            }
            PlannerOptions o = s.options;
            if (s.request.time_limit_s) {
              const double left = *s.request.time_limit_s - elapsed();
              if (left <= 0) continue;  // never started: apply_budgets marks it
              o.time_limit_s = left;
            }
            LayoutResult r = evaluate_layout(s.config, s.layouts[i], s.request.effort, o);
            const std::lock_guard<std::mutex> lock(m);
            results[i] = std::move(r);
            const LayoutResult& got = *results[i];
            ++progress.done;
            progress.evaluations += got.evaluations;
            if (got.rejected.empty() && got.fits && got.iteration_time > 0 &&
                (!progress.best || got.iteration_time < *progress.best))
              progress.best = got.iteration_time;
            progress.elapsed_s = elapsed();
            account();
            if (done) done(i, got, progress);
          }
        },
        tbb::simple_partitioner());
  });
  return apply_budgets(s, std::move(results));
}

SearchReport rank_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                         double wall_s, const std::string& stopped_by) {
  SearchReport report;
  report.stopped_by = stopped_by;
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
  SearchRun run =
      evaluate_search(s, {}, [&](std::size_t, const LayoutResult&, const SearchProgress&) {
        if (done) done();
      });
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json document =
      search_document(rank_search(s, std::move(run.results), 1, wall, run.stopped_by));
  document["bmpipe"] = provenance(config.file);
  return document;
}

}  // namespace bmpipe::api
