// bmpipe search: every sensible parallel layout of a model on a cluster, each planned,
// ranked by simulated iteration time. Runs on one machine, or on many under MPI
// (cli/search_mpi.cpp), with the same answer.
#include <unistd.h>

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "cli/search.hpp"
#include "experiment/write_config.hpp"
#include "traces/summary.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

std::vector<int> int_list(const po::variables_map& vm, const char* option) {
  std::vector<int> out;
  if (!vm.count(option)) return out;
  const std::string text = vm[option].as<std::string>();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw UsageError(std::string("--") + option,
                       "expected a comma-separated list of integers, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(std::string("--") + option, "the list is empty");
  return out;
}

std::vector<std::string> name_list(const po::variables_map& vm, const char* option) {
  std::vector<std::string> out;
  if (!vm.count(option)) return out;
  std::stringstream in(vm[option].as<std::string>());
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  if (out.empty()) throw UsageError(std::string("--") + option, "the list is empty");
  return out;
}

std::string ms(Time t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", ns_to_ms(t));
  return buf;
}

}  // namespace

nlohmann::json layout_json(const LayoutResult& r) {
  nlohmann::json j{
      {"tp", r.layout.tp},
      {"pp", r.layout.pp},
      {"dp", r.layout.dp},
      {"vpp", r.layout.vpp},
      {"micro_batch_size", r.layout.micro_batch_size},
      {"schedule", r.layout.schedule},
      {"microbatches", r.microbatches},
      {"fits", r.rejected.empty() && r.fits},
      {"rejected", r.rejected.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.rejected)}};
  if (!r.filter.empty()) j["filter"] = r.filter;
  if (r.iteration_time > 0) {
    j["iteration_time_ms"] = ns_to_ms(r.iteration_time);
    j["tokens_per_s"] = r.tokens_per_s;
    j["mfu"] = r.mfu;
    j["tflops_per_device"] = r.tflops_per_device;
    j["bubble_ratio"] = r.bubble_ratio;
    j["max_peak_memory_bytes"] = r.max_peak_bytes;
    j["capacity_bytes"] = r.capacity_bytes;
    j["partition"] = r.plan.partition;
    std::vector<std::string> modes;
    for (Recompute m : r.plan.recompute) modes.emplace_back(recompute_name(m));
    j["layer_recompute"] = modes;
  } else {
    j["iteration_time_ms"] = nullptr;
    j["tokens_per_s"] = nullptr;
    j["mfu"] = nullptr;
  }
  j["evaluations"] = r.evaluations;
  return j;
}

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

std::string encode_result(const LayoutResult& r) {
  nlohmann::json j = layout_json(r);
  j["iteration_time_ns"] = r.iteration_time;
  j["fits"] = r.fits;  // the raw flag (layout_json folds rejection into it)
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LayoutResult decode_result(const std::string& text) {
  return layout_from_json(nlohmann::json::parse(text));
}

SearchSetup setup_search(const std::vector<std::string>& args, std::optional<int>* exit_code) {
  SearchSetup s;
  po::options_description opts("bmpipe search CONFIG [options]\n\nOptions");
  add_config_options(opts);
  // clang-format off
  opts.add_options()
      ("tp", po::value<std::string>()->value_name("LIST"), "tensor-parallel sizes, e.g. 1,2,4,8 (default: powers of two "
                                       "up to a node that divide the heads and the FFN)")
      ("pp", po::value<std::string>()->value_name("LIST"), "pipeline sizes (default: every divisor of devices / tp up to "
                                       "the layers)")
      ("vpp", po::value<std::string>()->value_name("LIST"), "chunks per device for interleaved (default: 2, 3, 4 where "
                                        "pp x vpp divides the layers)")
      ("micro-batch-size", po::value<std::string>()->value_name("LIST"), "micro-batch sizes (default 1,2,4)")
      ("schedules", po::value<std::string>()->value_name("LIST"), ("schedules (default 1f1b,interleaved; " +
                                               schedule_names() + ")").c_str())
      ("planner", po::value<std::string>()->value_name("EFFORT")->default_value("quick"),
       "off (uniform partition, the config's recompute), quick (planner, 300 evaluations) or "
       "full (planner, --max-evals)")
      ("max-evals", po::value<std::int64_t>()->value_name("N")->default_value(20000), "planner budget with --planner full")
      ("memory-limit-GiB", po::value<double>()->value_name("GiB"), "GiB a device may use (replaces its capacity)")
      ("seed", po::value<std::uint64_t>()->value_name("N")->default_value(1), "planner seed")
      ("threads", po::value<int>()->value_name("N")->default_value(0, "all cores"), "layouts evaluated at once per process")
      ("top", po::value<int>()->value_name("N")->default_value(10), "rows of the table")
      ("json", po::bool_switch(), "print {layouts, search} as JSON")
      ("csv", po::value<std::string>()->value_name("FILE"), "write every layout as CSV to FILE")
      ("out", po::value<std::string>()->value_name("FILE"), "write the best layout, planned, as a config to FILE")
      ("quiet", po::bool_switch(), "no progress line on stderr");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "search", args, opts,
          "Enumerates tp x pp x dp (dp = devices / (tp pp)), interleaved chunks, micro-batch\n"
          "sizes and schedules for the config's model, cluster and global batch; rejects what\n"
          "cannot divide or cannot hold its weights, gradients and optimizer state; plans\n"
          "every other layout (its own partition and recompute) and ranks them by simulated\n"
          "iteration time. Budgets are in evaluations, so results do not depend on the\n"
          "machine. Under mpirun the layouts are shared by the processes; the answer is the\n"
          "same.\n"
          "Exit codes: 0 success, 2 bad input, 70 internal error.\n",
          vm)) {
    *exit_code = *stop;
    return s;
  }
  s.json = vm["json"].as<bool>();
  s.quiet = vm["quiet"].as<bool>();
  s.top = vm["top"].as<int>();
  if (s.top < 1) throw UsageError("--top", "must be at least 1");
  const std::string planner = vm["planner"].as<std::string>();
  if (planner == "off")
    s.effort = PlannerEffort::off;
  else if (planner == "quick")
    s.effort = PlannerEffort::quick;
  else if (planner == "full")
    s.effort = PlannerEffort::full;
  else
    throw UsageError("--planner", "unknown value '" + planner + "' (off, quick, full)");
  s.space.tp = int_list(vm, "tp");
  s.space.pp = int_list(vm, "pp");
  s.space.vpp = int_list(vm, "vpp");
  s.space.micro_batch_size = int_list(vm, "micro-batch-size");
  s.space.schedules = name_list(vm, "schedules");
  if (vm.count("csv")) s.csv = vm["csv"].as<std::string>();
  if (vm.count("out")) s.out = vm["out"].as<std::string>();
  s.options.seed = vm["seed"].as<std::uint64_t>();
  s.options.max_evals = vm["max-evals"].as<std::int64_t>();
  if (s.options.max_evals < 1) throw UsageError("--max-evals", "must be at least 1");
  s.threads = vm["threads"].as<int>();
  if (s.threads < 0) throw UsageError("--threads", "must be 0 or more");
  s.options.threads = 1;  // parallelism is across layouts
  s.path = vm["config"].as<std::string>();
  s.config = load_config(s.path);
  if (vm.count("memory-limit-GiB")) {
    const double g = vm["memory-limit-GiB"].as<double>();
    if (!(g > 0) || g > 1e6)
      throw UsageError("--memory-limit-GiB", "must be a positive number of GiB");
    s.options.memory_limit_bytes = static_cast<std::int64_t>(std::llround(g * 1073741824.0));
  }
  s.layouts = enumerate_layouts(s.config, s.space, &s.rejected);
  return s;
}

/// Evaluates layouts [begin, end) of `s` on this process's cores, in parallel; calls
/// `done` (from any thread, serialised) after each.
void evaluate_range(const SearchSetup& s, std::size_t begin, std::size_t end,
                    std::vector<LayoutResult>& out, const std::function<void()>& done) {
  // Never more threads than the process may run (mpirun may bind it to fewer cores).
  const int cores = tbb::this_task_arena::max_concurrency();
  tbb::task_arena arena(s.threads > 0 ? std::min(s.threads, cores) : cores);
  std::mutex m;
  arena.execute([&] {
    tbb::parallel_for(begin, end, [&](std::size_t i) {
      LayoutResult r = evaluate_layout(s.config, s.layouts[i], s.effort, s.options);
      std::lock_guard<std::mutex> lock(m);
      out[i] = std::move(r);
      if (done) done();
    });
  });
}

int report_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                  double wall_s) {
  std::map<std::string, int> rejected_by;
  std::int64_t evaluations = 0;
  for (const LayoutResult& r : results) evaluations += r.evaluations;
  for (const LayoutResult& r : s.rejected) results.push_back(r);
  for (const LayoutResult& r : results)
    if (!r.rejected.empty()) ++rejected_by[r.filter];
  rank_layouts(results);

  if (s.out) {
    if (results.empty() || !results.front().rejected.empty() || !results.front().fits)
      throw ConfigError(s.config.file, 0, "--out", "no layout fits: nothing to write");
    const LayoutResult& best = results.front();
    std::ifstream in(s.path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    ConfigEdits edits{best.layout.schedule, best.layout.pp,      best.layout.vpp,
                      best.microbatches,    best.plan.partition, best.plan.recompute,
                      best.layout.tp,       best.layout.dp,      best.layout.micro_batch_size};
    const std::string body = config_with_edits(
        text.str(), s.path, *s.out, edits,
        "Written by bmpipe search from " + s.path + ": the fastest layout, " +
            to_string(best.layout) + ", " + ms(best.iteration_time) +
            " ms per iteration as simulated.\n`bmpipe simulate` on this file reproduces it.");
    std::ofstream file;
    open_output(file, *s.out, "--out");
    file << body;
    close_output(file, *s.out, "--out");
  }
  if (s.csv) {
    std::ofstream file;
    open_output(file, *s.csv, "--csv");
    file << "tp,pp,dp,vpp,micro_batch_size,schedule,microbatches,fits,iteration_time_ms,"
            "tokens_per_s,mfu,tflops_per_device,bubble_ratio,max_peak_memory_bytes,"
            "capacity_bytes,rejected\n";
    for (const LayoutResult& r : results) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%d,%d,%d,%d,%d,%s,%d,%s,", r.layout.tp, r.layout.pp,
                    r.layout.dp, r.layout.vpp, r.layout.micro_batch_size, r.layout.schedule.c_str(),
                    r.microbatches, r.rejected.empty() && r.fits ? "true" : "false");
      file << buf;
      if (r.iteration_time > 0) {
        std::snprintf(buf, sizeof buf, "%.6f,%.3f,%.6f,%.3f,%.6f,%lld,%lld,",
                      ns_to_ms(r.iteration_time), r.tokens_per_s, r.mfu, r.tflops_per_device,
                      r.bubble_ratio, static_cast<long long>(r.max_peak_bytes),
                      static_cast<long long>(r.capacity_bytes));
        file << buf;
      } else {
        file << ",,,,,,,";
      }
      std::string why = r.rejected;
      std::replace(why.begin(), why.end(), '"', '\'');
      file << '"' << why << "\"\n";
    }
    close_output(file, *s.csv, "--csv");
  }
  if (s.json) {
    nlohmann::json layouts = nlohmann::json::array();
    for (const LayoutResult& r : results) layouts.push_back(layout_json(r));
    nlohmann::json filters;
    for (const auto& [f, n] : rejected_by) filters[f] = n;
    nlohmann::json j{{"layouts", layouts},
                     {"search",
                      {{"layouts", results.size()},
                       {"rejected_by", filters},
                       {"evaluations", evaluations},
                       {"processes", processes},
                       {"wall_s", wall_s}}}};
    std::cout << json_text(j) << "\n";
    return 0;
  }
  std::cout << "bmpipe search " << s.config.file << "\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4s %4s %4s %4s %4s %4s %-12s %14s %11s %6s %9s %8s %24s\n", "#",
                "tp", "pp", "dp", "vpp", "mbs", "schedule", "iteration ms", "tokens/s", "MFU %",
                "TFLOP/s", "bubble %", "max peak / capacity");
  std::cout << buf;
  int shown = 0, fitting = 0;
  for (const LayoutResult& r : results) {
    if (!r.rejected.empty() || !r.fits) continue;
    ++fitting;
    if (shown >= s.top) continue;
    ++shown;
    std::snprintf(buf, sizeof buf,
                  "%4d %4d %4d %4d %4d %4d %-12s %14s %11.0f %6.1f %9.1f %8.2f %24s\n", shown,
                  r.layout.tp, r.layout.pp, r.layout.dp, r.layout.vpp, r.layout.micro_batch_size,
                  r.layout.schedule.c_str(), ms(r.iteration_time).c_str(), r.tokens_per_s,
                  100 * r.mfu, r.tflops_per_device, 100 * r.bubble_ratio,
                  (format_gib(r.max_peak_bytes) + " / " + format_gib(r.capacity_bytes)).c_str());
    std::cout << buf;
  }
  std::cout << "\n" << fitting << " of " << results.size() << " layouts fit";
  if (fitting > shown) std::cout << " (" << shown << " shown; --top N for more, --json for all)";
  std::cout << "\nrejected:";
  if (rejected_by.empty()) std::cout << " none";
  for (const auto& [f, n] : rejected_by) std::cout << " " << n << " by " << f;
  std::cout << "\n";
  int listed = 0;
  for (const LayoutResult& r : results) {
    if (r.rejected.empty() && r.fits) continue;
    if (listed++ >= s.top) break;
    std::cout << "  " << to_string(r.layout) << ": " << r.rejected << "\n";
  }
  std::snprintf(buf, sizeof buf, "\nsearch: %zu layouts, %lld evaluations, %d process%s, %.2f s\n",
                results.size(), static_cast<long long>(evaluations), processes,
                processes == 1 ? "" : "es", wall_s);
  std::cout << buf;
  return 0;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

int run_search(const std::vector<std::string>& args) {
  try {
    if (launched_by_mpi()) {
#ifdef BMPIPE_HAVE_MPI
      return run_search_mpi(args);
#else
      // Without MPI every process would search alone and print: only process 0 does.
      const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
      if (!r) r = std::getenv("PMIX_RANK");
      if (!r) r = std::getenv("PMI_RANK");
      if (r && std::string(r) != "0") return 0;
      std::cerr << "bmpipe search: this bmpipe was built without MPI; process 0 searches alone\n";
#endif
    }
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> stop;
    SearchSetup s = setup_search(args, &stop);
    if (stop) return *stop;
    std::vector<LayoutResult> results(s.layouts.size());
    const bool live = !s.quiet && isatty(STDERR_FILENO);
    std::atomic<std::size_t> finished{0};
    auto progress = [&] {
      const std::size_t done = ++finished;
      if (!live) return;
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Time best = 0;
      for (const LayoutResult& r : results)
        if (r.rejected.empty() && r.fits && r.iteration_time > 0 &&
            (best == 0 || r.iteration_time < best))
          best = r.iteration_time;
      const double eta = done ? elapsed / done * (s.layouts.size() - done) : 0;
      std::fprintf(stderr, "\rsearch: %zu / %zu layouts, best %s, %.1f s, ETA %.0f s   ", done,
                   s.layouts.size(), best ? (ms(best) + " ms").c_str() : "none yet", elapsed, eta);
    };
    evaluate_range(s, 0, s.layouts.size(), results, progress);
    if (live) std::fprintf(stderr, "\r%100s\r", "");
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report_search(s, std::move(results), 1, wall);
  } catch (const UsageError& e) {
    std::cerr << "bmpipe search: " << e.what() << "\n";
    return 2;
  } catch (const OutputError& e) {
    std::cerr << "bmpipe search: " << e.what() << "\n";
    return 2;
  } catch (const ConfigError& e) {
    std::cerr << "bmpipe search: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace bmpipe::cli
