#include "api/report.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <tuple>

#include "api/contracts.hpp"
#include "api/export.hpp"
#include "api/summary.hpp"
#include "experiment/experiment.hpp"
#include "experiment/output_work.hpp"
#include "sim/observer.hpp"
#include "traces/chrome_trace.hpp"

namespace bmpipe::api {

// The page's HTML, CSS and JavaScript: report/report.html, compiled in by
// api/CMakeLists.txt (from report/report_page.cpp.in).
std::string_view report_template();

namespace {

/// Keeps the transfers of a run; the timeline recorder ignores them.
class TransferCollector final : public Observer {
 public:
  void on_op(const OpRecord&) override {}
  void on_transfer(const TransferRecord& t) override { transfers.push_back(t); }
  void on_memory(int, Time, std::int64_t) override {}
  void on_reduction(const ReductionRecord&) override {}
  void on_copy(const CopyRecord&) override {}
  void on_result(const SimResult&) override {}
  std::vector<TransferRecord> transfers;
};

template <typename T>
T at_or(const std::vector<T>& v, std::size_t i, T fallback) {
  return i < v.size() ? v[i] : fallback;
}

std::string kind_name(const ReportRequest& r) {
  std::string kind = "simulate";
  if (r.compare) kind += "+compare";
  if (r.plan) kind += "+plan";
  if (r.search) kind += "+search";
  return kind;
}

}  // namespace

nlohmann::json pack_column(const std::vector<std::int64_t>& values) {
  using nlohmann::json;
  auto text_size = [](const json& j) { return j.dump().size(); };
  // Runs of equal values: [value, count, value, count, ...].
  auto runs_of = [](const std::vector<std::int64_t>& v) {
    json runs = json::array();
    for (std::size_t i = 0; i < v.size();) {
      std::size_t n = 1;
      while (i + n < v.size() && v[i + n] == v[i]) ++n;
      runs.push_back(v[i]);
      runs.push_back(n);
      i += n;
    }
    return runs;
  };
  json best = values;
  std::size_t best_size = text_size(best);
  auto consider = [&](json candidate) {
    const std::size_t size = text_size(candidate);
    if (size < best_size) {
      best = std::move(candidate);
      best_size = size;
    }
  };
  consider(json{{"r", runs_of(values)}});
  std::vector<std::int64_t> deltas(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) deltas[i] = values[i] - (i ? values[i - 1] : 0);
  consider(json{{"dr", runs_of(deltas)}});
  // A table of the distinct values, when there are few, and indices into it (themselves
  // plain or runs).
  std::map<std::int64_t, std::int64_t> index;
  for (std::int64_t v : values)
    if (index.size() <= 4096) index.try_emplace(v, 0);
  if (index.size() <= 4096 && index.size() * 4 < values.size()) {
    std::vector<std::int64_t> table;
    for (auto& [value, i] : index) {
      i = static_cast<std::int64_t>(table.size());
      table.push_back(value);
    }
    std::vector<std::int64_t> indices;
    indices.reserve(values.size());
    for (std::int64_t v : values) indices.push_back(index[v]);
    json runs{{"r", runs_of(indices)}};
    json plain = indices;
    consider(json{{"t", table}, {"i", text_size(runs) < text_size(plain) ? runs : plain}});
  }
  return best;
}

std::vector<std::int64_t> unpack_column(const nlohmann::json& packed) {
  std::vector<std::int64_t> out;
  if (packed.is_array()) {
    for (const auto& v : packed) out.push_back(v.get<std::int64_t>());
    return out;
  }
  auto expand = [](const nlohmann::json& runs) {
    std::vector<std::int64_t> v;
    for (std::size_t i = 0; i + 1 < runs.size(); i += 2)
      v.insert(v.end(), runs[i + 1].get<std::size_t>(), runs[i].get<std::int64_t>());
    return v;
  };
  if (packed.contains("r")) return expand(packed["r"]);
  if (packed.contains("dr")) {
    out = expand(packed["dr"]);
    for (std::size_t i = 1; i < out.size(); ++i) out[i] += out[i - 1];
    return out;
  }
  const std::vector<std::int64_t> indices = unpack_column(packed["i"]);
  const auto& table = packed["t"];
  for (std::int64_t i : indices)
    out.push_back(table.at(static_cast<std::size_t>(i)).get<std::int64_t>());
  return out;
}

nlohmann::json timeline_data(const Timeline& t, const std::vector<TransferRecord>& transfers,
                             const std::vector<int>& stage_rank, const StageLabels& labels) {
  using nlohmann::json;
  json j;
  const auto ranks = static_cast<std::size_t>(std::max(t.num_ranks, 0));
  j["ranks"] = t.num_ranks;
  j["rank_device"] = t.rank_device;
  j["stage_rank"] = stage_rank;
  j["stage_chunk"] = t.stage_chunk;
  j["stage_layers"] = labels.layers;
  j["stage_recompute"] = labels.recompute;
  j["pipeline_ns"] = t.pipeline_time;
  j["iteration_ns"] = t.iteration_time;
  j["static_bytes"] = t.static_bytes;
  j["capacity_bytes"] = t.capacity_bytes;
  json tail_start = json::array(), tail = json::array();
  for (std::size_t r = 0; r < ranks; ++r) {
    tail.push_back(at_or<Time>(t.tail_time, r, 0));
    tail_start.push_back(at_or<Time>(t.tail_start, r, 0));
  }
  j["tail_start_ns"] = tail_start;
  j["tail_ns"] = tail;

  // Ops per rank in start order: columns, the start as the gap since the previous op's end
  // (mostly 0 or a small number), which keeps a 131 072-op run to a few MB.
  std::vector<std::vector<const Timeline::Box*>> rows(ranks);
  for (const Timeline::Box& b : t.boxes)
    if (b.rank >= 0 && static_cast<std::size_t>(b.rank) < ranks) rows[b.rank].push_back(&b);
  json ops = json::array();
  for (auto& row : rows) {
    std::stable_sort(row.begin(), row.end(), [](const Timeline::Box* a, const Timeline::Box* b) {
      return a->start < b->start;
    });
    std::string k;
    std::vector<std::int64_t> s, m, g, d, x;
    Time previous_end = 0;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const Timeline::Box& b = *row[i];
      k += op_kind_char(b.op.kind);
      s.push_back(b.op.stage);
      m.push_back(b.op.microbatch);
      g.push_back(b.start - previous_end);
      d.push_back(b.end - b.start);
      if (b.op.kind == OpKind::FB) {
        x.push_back(static_cast<std::int64_t>(i));
        x.push_back(b.op.stage2);
        x.push_back(b.op.microbatch2);
      }
      previous_end = b.end;
    }
    ops.push_back({{"k", k},
                   {"s", pack_column(s)},
                   {"m", pack_column(m)},
                   {"g", pack_column(g)},
                   {"d", pack_column(d)},
                   {"x", x}});
  }
  j["ops"] = ops;

  // Transfers: stages, micro-batch and direction name the producing op, the wait and the
  // duration give the rest. Sorted so that the columns come in long runs.
  std::vector<const TransferRecord*> sorted;
  for (const TransferRecord& tr : transfers) sorted.push_back(&tr);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TransferRecord* a, const TransferRecord* b) {
                     return std::tuple(a->src_stage, a->dst_stage, a->gradient, a->microbatch) <
                            std::tuple(b->src_stage, b->dst_stage, b->gradient, b->microbatch);
                   });
  std::vector<std::int64_t> ts, tt, tm, tk, tw, td;
  for (const TransferRecord* tr : sorted) {
    ts.push_back(tr->src_stage);
    tt.push_back(tr->dst_stage);
    tm.push_back(tr->microbatch);
    tk.push_back(tr->gradient ? 1 : 0);
    tw.push_back(tr->start - tr->requested);
    td.push_back(tr->end - tr->start);
  }
  j["transfers"] = {{"s", pack_column(ts)}, {"t", pack_column(tt)}, {"m", pack_column(tm)},
                    {"k", pack_column(tk)}, {"w", pack_column(tw)}, {"d", pack_column(td)}};

  // Memory: the step curve as changes, since the previous sample.
  json memory = json::array();
  for (std::size_t r = 0; r < ranks; ++r) {
    std::vector<std::int64_t> g, v;
    Time previous_time = 0;
    std::int64_t previous_bytes = 0;
    if (r < t.memory.size())
      for (const Timeline::MemorySample& sample : t.memory[r]) {
        g.push_back(sample.time - previous_time);
        v.push_back(sample.activation_bytes - previous_bytes);
        previous_time = sample.time;
        previous_bytes = sample.activation_bytes;
      }
    memory.push_back({{"g", pack_column(g)}, {"v", pack_column(v)}});
  }
  j["memory"] = memory;
  return j;
}

double PlanEstimate::baselines_s() const {
  return static_cast<double>(schedules) * baselines * simulation_s;
}

double PlanEstimate::most_s() const {
  return baselines_s() + static_cast<double>(schedules) * static_cast<double>(max_evals) *
                             simulation_s / std::max(threads, 1);
}

namespace {

// "0.42 s", "29 s", "8.1 min", "8.1 h": a duration as a person reads it.
std::string duration_text(double s) {
  char buf[32];
  if (s < 10)
    std::snprintf(buf, sizeof buf, "%.2g s", s);
  else if (s < 120)
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

}  // namespace

std::string PlanEstimate::text() const {
  const int t = std::max(threads, 1);
  return "planning runs one simulation of this run per candidate plan, about " +
         duration_text(simulation_s) + " each (as long as the report's own run): about " +
         duration_text(baselines_s()) + " for the " + std::to_string(baselines) + " baselines" +
         (schedules > 1 ? " of each of " + std::to_string(schedules) + " schedules" : "") +
         ", then up to " + std::to_string(max_evals) + " candidates" +
         (schedules > 1 ? " each" : "") + ", at most " + duration_text(most_s()) + " in all on " +
         std::to_string(t) + (t == 1 ? " thread" : " threads") +
         " (--max-evals and --time-limit-s bound it)";
}

nlohmann::json report_data(const Config& config, const ReportRequest& request) {
  using nlohmann::json;
  json j;
  j["bmpipe"] = provenance(config.file);
  j["report"] = kReportVersion;
  j["kind"] = kind_name(request);

  const auto phase = [&request](const std::string& what) {
    if (request.on_phase) request.on_phase(what);
  };
  // The page keeps every op: counted against the work limit before anything is allocated.
  check_output_work(config, {{"the HTML report", kReportBytesPerOp}});
  // The run, recorded for the timeline (ops, memory) and its links (transfers).
  phase("making the schedule");
  const PreparedSimulation run = prepare_simulation(config, request.simulate);
  TimelineRecorder recorder(run.input, run.schedule, run.schedule.name);
  TransferCollector transfers;
  TeeObserver observers({&recorder, &transfers});
  const auto started = std::chrono::steady_clock::now();
  const SimulationReport report = run_prepared(run, observers.get(), phase);
  // Only the progress line hears the time: the page is the same bytes on every run.
  const double run_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const Timeline timeline = recorder.take(report.result);
  j["summary"] = report.summary;
  j["summary_text"] =
      summary_text(report.info, report.result, report.bubbles ? &*report.bubbles : nullptr);
  const std::vector<StageInfo> stages = stage_info(*run.experiment, run.plan);
  const StageLabels labels{layer_range_labels(run.plan.partition), stage_recompute_labels(stages)};
  j["timeline"] = timeline_data(timeline, transfers.transfers, run.schedule.stage_rank, labels);
  j["title"] = run.experiment->config.file;

  if (request.compare) {
    CompareRequest compare = *request.compare;
    compare.record_timelines = false;
    compare.on_phase = [&phase](const std::string& what) { phase("comparing: " + what); };
    j["compare"] = run_compare(config, compare).summary;
  }
  if (request.plan) {
    if (request.on_plan_estimate) {
      PlanEstimate estimate;
      estimate.simulation_s = run_s;
      estimate.baselines = static_cast<int>(baseline_names().size());
      estimate.max_evals = request.plan->max_evals;
      estimate.threads = request.plan->threads > 0
                             ? request.plan->threads
                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      if (request.plan->overrides.schedule == "auto")
        estimate.schedules = static_cast<int>(auto_schedules(*run.experiment).size());
      request.on_plan_estimate(estimate);
    }
    phase("planning");
    const PlanResults plan = run_plan(config, *request.plan);
    j["plan"] = plan.summary;
    // The snippets `plan --format` prints, under the plan's memory limit.
    const double limit_GiB =
        static_cast<double>(plan_memory_limit_bytes(config, *request.plan)) / 1073741824.0;
    json exports = json::object();
    for (const std::string& format : export_formats()) {
      try {
        exports[format] = export_plan(config, plan, ExportRequest{format, limit_GiB}).text;
      } catch (const ConfigError& e) {
        // A framework that cannot run the plan says why, in the page.
        exports[format] = std::string("# cannot export: ") + e.what() + "\n";
      } catch (const RequestError& e) {
        exports[format] = std::string("# cannot export: ") + e.what() + "\n";
      }
    }
    j["plan_exports"] = exports;
  }
  if (request.search) {
    phase("searching");
    j["search"] = run_search(config, *request.search);
  }
  return j;
}

std::string report_html(const nlohmann::json& data) {
  const std::string_view page = report_template();
  constexpr std::string_view marker = "{{BMPIPE_DATA}}";
  const std::size_t at = page.find(marker);
  if (at == std::string_view::npos || page.find(marker, at + 1) != std::string_view::npos)
    throw std::logic_error("report/report.html must hold {{BMPIPE_DATA}} exactly once");
  const std::string text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(page.size() + text.size() + text.size() / 64);
  out.append(page.substr(0, at));
  for (char c : text)
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  out.append(page.substr(at + marker.size()));
  return out;
}

}  // namespace bmpipe::api
