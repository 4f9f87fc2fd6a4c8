#include "api/request_table.hpp"

#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "experiment/suggest.hpp"
#include "planner/planner.hpp"
#include "schedules/registry.hpp"

namespace bmpipe::api {

std::string python_name(const std::string& option) {
  std::string name = option;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

std::string did_you_mean_option(const std::string& name, const std::vector<std::string>& names) {
  return did_you_mean(name, names);
}

namespace {

/// `text` read whole by `parse` (std::stoi and the like), else none.
template <class Parse>
auto whole(const std::string& text, Parse parse) -> std::optional<decltype(parse(text, nullptr))> {
  std::size_t used = 0;
  try {
    auto value = parse(text, &used);
    if (!text.empty() && used == text.size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

OptionValue option_value_from_text(const OptionSpec& option, const std::string& text) {
  using K = OptionKind;
  auto expected = [&](const std::string& what) {
    return RequestError("--" + option.name, "expected " + what + ", got '" + text + "'");
  };
  auto as_int = [](const std::string& t, std::size_t* used) { return std::stoi(t, used); };
  switch (option.kind) {
    case K::flag:
      if (text == "true" || text == "false") return text == "true";
      throw expected("true or false");
    case K::int32:
      if (auto v = whole(text, as_int)) return *v;
      throw expected("an integer");
    case K::int64:
      if (auto v = whole(text, [](const std::string& t, std::size_t* used) {
            return static_cast<std::int64_t>(std::stoll(t, used));
          }))
        return *v;
      throw expected("an integer");
    case K::uint64:
      if (text.find('-') == std::string::npos)
        if (auto v = whole(text, [](const std::string& t, std::size_t* used) {
              return static_cast<std::uint64_t>(std::stoull(t, used));
            }))
          return *v;
      throw expected("a non-negative integer");
    case K::number:
      if (auto v = whole(
              text, [](const std::string& t, std::size_t* used) { return std::stod(t, used); }))
        return *v;
      throw expected("a number");
    case K::int_list: {
      std::vector<int> out;
      std::stringstream in(text);
      std::string item;
      while (std::getline(in, item, ',')) {
        const std::optional<int> v = whole(item, as_int);
        if (!v) throw expected("a comma-separated list of integers");
        out.push_back(*v);
      }
      return out;
    }
    case K::name_list:
      return split_names(text);
    case K::repeated:
      return std::vector<std::string>{text};
    case K::text:
    case K::yaml:
      break;
  }
  return text;
}

std::string default_shown(const OptionSpec& option) {
  if (!option.default_text.empty() || !option.default_value) return option.default_text;
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%g", v);
          return buf;
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_integral_v<T>) {
          return std::to_string(v);
        } else {
          return "";
        }
      },
      *option.default_value);
}

namespace {

// ---- building rows ------------------------------------------------------------------------

template <class T>
constexpr OptionKind kind_of() {
  if constexpr (std::is_same_v<T, bool>) return OptionKind::flag;
  if constexpr (std::is_same_v<T, int>) return OptionKind::int32;
  if constexpr (std::is_same_v<T, std::int64_t>) return OptionKind::int64;
  if constexpr (std::is_same_v<T, std::uint64_t>) return OptionKind::uint64;
  if constexpr (std::is_same_v<T, double>) return OptionKind::number;
  if constexpr (std::is_same_v<T, std::string>) return OptionKind::text;
  if constexpr (std::is_same_v<T, std::vector<int>>) return OptionKind::int_list;
  return OptionKind::name_list;
}

template <class T>
struct Optional {
  using type = T;
  static constexpr bool value = false;
};
template <class T>
struct Optional<std::optional<T>> {
  using type = T;
  static constexpr bool value = true;
};

/// A row that assigns the member `m` (a std::optional member: set when given, no default
/// shown); the default is a default-constructed request's.
template <class R, class M>
RequestOption<R> member(std::string name, M R::*m, std::string value_name, std::string help) {
  using T = typename Optional<M>::type;
  RequestOption<R> o;
  o.name = std::move(name);
  o.kind = kind_of<T>();
  o.value_name = std::move(value_name);
  o.help = std::move(help);
  if constexpr (!Optional<M>::value) o.default_value = OptionValue(R{}.*m);
  o.set = [m](R& r, OptionValue v) { r.*m = std::get<T>(std::move(v)); };
  return o;
}

/// A row that calls `set(request, value)`, of kind `kind` with no default shown.
template <class R, class F>
RequestOption<R> setter(std::string name, OptionKind kind, std::string value_name, std::string help,
                        F set) {
  RequestOption<R> o;
  o.name = std::move(name);
  o.kind = kind;
  o.value_name = std::move(value_name);
  o.help = std::move(help);
  o.set = std::move(set);
  return o;
}

/// The rows of `table` on the member `m` of R.
template <class R, class M>
void append_on(RequestTable<R>& into, const RequestTable<M>& table, M R::*m) {
  for (const RequestOption<M>& row : table) {
    RequestOption<R> o;
    static_cast<OptionSpec&>(o) = row;
    o.set = [m, set = row.set](R& r, OptionValue v) { set(r.*m, std::move(v)); };
    if (row.refuses) o.refuses = [m, refuses = row.refuses](const R& r) { return refuses(r.*m); };
    into.push_back(std::move(o));
  }
}

/// A config key given on the command line, as Overrides::set holds it.
RequestOption<Overrides> key(std::string name, std::string key_path, std::string value_name,
                             std::string help, bool list = false) {
  return setter<Overrides>(std::move(name), OptionKind::yaml, std::move(value_name),
                           std::move(help), [key_path, list](Overrides& o, OptionValue v) {
                             std::string text = std::get<std::string>(std::move(v));
                             o.set.emplace_back(key_path, list ? "[" + text + "]" : text);
                           });
}

/// A --max-ops or --max-devices limit, at least 1.
template <class T>
RequestOption<Overrides> limit(std::string name, T WorkLimits::*m, std::string help) {
  return setter<Overrides>(name, kind_of<T>(), "N", std::move(help),
                           [name, m](Overrides& o, OptionValue v) {
                             if (!o.limits) o.limits = WorkLimits{};
                             (*o.limits).*m = std::get<T>(v);
                             if ((*o.limits).*m < 1)
                               throw RequestError("--" + name, "must be at least 1");
                           });
}

void append_batch_and_set(RequestTable<Overrides>& t) {
  t.push_back(key("global-batch-size", "training.global_batch_size", "N",
                  "samples per iteration (training.global_batch_size; wins over the file's "
                  "microbatches)"));
  t.push_back(
      key("seq-length", "training.seq_length", "N", "tokens per sample (training.seq_length)"));
  t.push_back(setter<Overrides>(
      "set", OptionKind::repeated, "KEY=VALUE",
      "set any config key, e.g. --set training.sequence_parallel=true (repeatable; values are "
      "YAML)",
      [](Overrides& o, OptionValue v) {
        for (const std::string& kv : std::get<std::vector<std::string>>(v)) {
          const std::size_t eq = kv.find('=');
          if (eq == std::string::npos || eq == 0)
            throw RequestError("--set",
                               "expected KEY=VALUE, e.g. training.sequence_parallel=true, "
                               "got '" +
                                   kv + "'");
          o.set.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        }
      }));
}

/// "1f1b, interleaved (v 2, 3, 4), zb-h1 and zb-v": what `--schedule auto` plans for,
/// read off the schedule table (auto_candidates).
std::string auto_names() {
  std::vector<std::string> names;
  for (const ScheduleInfo& info : builtin_schedules())
    if (info.auto_candidate)
      names.push_back(std::string(info.name) +
                      (info.placement == Placement::kLoop ? " (v 2, 3, 4)" : ""));
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

const char* effort_name(PlannerEffort e) {
  return e == PlannerEffort::off ? "off" : e == PlannerEffort::quick ? "quick" : "full";
}

/// The list of a search dimension, refused when empty (None is the default range).
template <class F>
RequestOption<SearchRequest> dimension(std::string name, std::string help, F list_of) {
  const bool names =
      std::is_same_v<std::invoke_result_t<F, SearchRequest&>, std::vector<std::string>&>;
  return setter<SearchRequest>(
      name, names ? OptionKind::name_list : OptionKind::int_list, "LIST", std::move(help),
      [name, list_of](SearchRequest& r, OptionValue v) {
        auto& into = list_of(r);
        into = std::get<std::remove_reference_t<decltype(into)>>(std::move(v));
        if (into.empty()) throw RequestError("--" + name, "the list is empty");
      });
}

}  // namespace

// ---- the tables ---------------------------------------------------------------------------

RequestTable<Overrides> override_options(const std::string& vpp_help) {
  const WorkLimits limits;
  RequestTable<Overrides> t;
  t.push_back(member("pp", &Overrides::pp, "N", "pipeline devices, overriding training.pp"));
  t.push_back(member("vpp", &Overrides::vpp, "N", vpp_help));
  t.push_back(member("microbatches", &Overrides::microbatches, "N",
                     "micro-batches per iteration, overriding training.microbatches"));
  t.push_back(limit("max-ops", &WorkLimits::max_ops,
                    "refuse runs of more ops than this (stages x micro-batches x ops per "
                    "micro-batch; about 50 bytes each; default " +
                        std::to_string(limits.max_ops) + ")"));
  t.push_back(limit("max-devices", &WorkLimits::max_devices,
                    "refuse clusters of more devices than this (default " +
                        std::to_string(limits.max_devices) + ")"));
  // The knobs are config keys: they go into the document and are checked like it. --set
  // comes last, so that it wins over a knob of the same key.
  t.push_back(key("tp", "training.tp", "N", "tensor-parallel size (training.tp)"));
  t.push_back(key("dp", "training.dp", "N", "data-parallel size (training.dp)"));
  t.push_back(key("micro-batch-size", "training.micro_batch_size", "N",
                  "samples per micro-batch (training.micro_batch_size)"));
  t.push_back(key("recompute", "training.recompute", "MODE",
                  "every layer's mode: none, selective, full, offload or selective_offload "
                  "(training.recompute)"));
  t.push_back(key("partition", "training.partition", "LIST",
                  "layers per stage, e.g. 9,9,8,6 (training.partition)", true));
  append_batch_and_set(t);
  return t;
}

RequestTable<Overrides> batch_and_set_options() {
  RequestTable<Overrides> t;
  append_batch_and_set(t);
  return t;
}

RequestTable<PlanRequest> plan_options() {
  using R = PlanRequest;
  RequestTable<R> t;
  t.push_back(setter<R>(
      "schedule", OptionKind::text, "NAME",
      "schedule to plan for, or 'auto' to plan for " + auto_names() + " and rank them (" +
          schedule_names() + ")",
      [](R& r, OptionValue v) { r.overrides.schedule = std::get<std::string>(std::move(v)); }));
  t.push_back(member("memory-limit-GiB", &R::memory_limit_GiB, "GiB",
                     "GiB a device may use (replaces its capacity)"));
  t.push_back(member("margin-GiB", &R::margin_GiB, "GiB", "GiB kept free below the limit"));
  t.push_back(member("threads", &R::threads, "N", "threads that simulate"));
  t.back().default_text = "all cores";
  t.push_back(member("seed", &R::seed, "N", "seed of the search"));
  t.push_back(member("max-evals", &R::max_evals, "N",
                     "simulations the search may run (the baselines come on top); with "
                     "--schedule auto, of all the schedules together (JSON: schedules_search)"));
  t.push_back(member("time-limit-s", &R::time_limit_s, "SECONDS",
                     "stop the search after this many seconds (results then depend on the "
                     "machine's speed); with --schedule auto, all the schedules together"));
  t.push_back(member("baseline", &R::baseline, "NAME",
                     "print (and --out / --format) this baseline's plan instead: " +
                         comma_list(baseline_names())));
  t.push_back(member("baseline-layout", &R::baseline_layout, "STRING",
                     "a Megatron-LM --pipeline-model-parallel-layout (\"Et*9|t*9|t*8|t*6L\") for "
                     "the megatron-layout baseline, under the fastest fitting recompute rule "
                     "(default: the config's training.megatron_layout, which import megatron "
                     "writes)"));
  t.push_back(member("expressible", &R::expressible, "FRAMEWORK",
                     "plan only what this framework states exactly, on the schedules it runs: "
                     "megatron (one recompute rule for all stages: none, selective, block N or "
                     "uniform), mindformers (per stage, the first n layers in full and the next "
                     "k selective) or torchtitan (one rule for all layers: none, full, "
                     "selective op or every n-th layer); with --offload, only the offload "
                     "choices it states"));
  t.push_back(
      member("offload", &R::offload, "auto|only|none",
             "auto: plan once for each activation-offload choice (none; core_attn,attn_proj; with "
             "qkv_linear; with experts, expert_fc1,moe_act and all) at each prefetch lead (the "
             "config's training.offload_lead, 0, 1, 2), for every layer (recompute chosen under "
             "each) and per layer (none, selective, full, offload or selective_offload per "
             "layer), and keep the fastest fitting; only: per layer none or offload, no "
             "recompute; needs a host link (default: none, the config's offload_modules and "
             "offload_lead only)"));
  append_on(t, override_options("chunks per device for interleaved"), &R::overrides);
  return t;
}

RequestTable<SearchRequest> search_options() {
  using R = SearchRequest;
  RequestTable<R> t;
  t.push_back(dimension(
      "tp",
      "tensor-parallel sizes, e.g. 1,2,4,8 (default: powers of two up to a "
      "node that divide the heads and the FFN)",
      [](R & r) -> auto& { return r.space.tp; }));
  t.push_back(dimension(
      "pp", "pipeline sizes (default: every divisor of devices / tp up to the layers)",
      [](R & r) -> auto& { return r.space.pp; }));
  t.push_back(dimension(
      "vpp",
      "chunks per device for interleaved (default: 2, 3, 4 while pp x vpp <= "
      "layers, as plan --schedule auto)",
      [](R & r) -> auto& { return r.space.vpp; }));
  t.push_back(dimension(
      "micro-batch-size", "micro-batch sizes (default 1,2,4)",
      [](R & r) -> auto& { return r.space.micro_batch_size; }));
  t.push_back(dimension(
      "ep",
      "expert-parallel sizes of a mixture-of-experts model (default: every "
      "divisor of the routed experts; 1 for dense models). Layouts whose etp "
      "x ep does not divide the stage's tp x dp devices are rejected by "
      "filter 'experts'",
      [](R & r) -> auto& { return r.space.ep; }));
  t.push_back(dimension(
      "etp", "expert tensor-parallel sizes (default 1)",
      [](R & r) -> auto& { return r.space.etp; }));
  t.push_back(dimension(
      "cp",
      "context-parallel sizes (default 1; measured layers: the config's): dp = "
      "devices / (tp pp cp), each cp cutting seq_length into 2 cp chunks",
      [](R & r) -> auto& { return r.space.cp; }));
  t.push_back(dimension(
      "schedules", "schedules (default 1f1b,interleaved; " + schedule_names() + ")",
      [](R & r) -> auto& { return r.space.schedules; }));
  t.push_back(member("offload", &R::offload, "auto|only|none",
                     "auto: every layout under each activation-offload choice at each prefetch "
                     "lead, as plan --offload auto tries them (job-wide, per layer, offload "
                     "alone), ranked with the rest; only: offload alone, each layer none or "
                     "offload, as plan --offload only (needs the planner); needs a host link "
                     "(default: none, the config's offload_modules only)"));
  t.push_back(member("expressible", &R::framework, "FRAMEWORK",
                     "rank only the layouts this framework runs, on its schedules and by its "
                     "rules (docs/export.md): megatron, mindformers, torchtitan or "
                     "torchtitan-registry; the others are rejected by filter 'framework' (as "
                     "search --format does)"));
  t.push_back(
      setter<R>("planner", OptionKind::text, "EFFORT",
                "off (uniform partition, the config's recompute), quick (planner, 300 "
                "evaluations, after the screen below) or full (planner, --layout-evals)",
                [](R& r, OptionValue v) { r.effort = planner_effort(std::get<std::string>(v)); }));
  t.back().default_value = OptionValue(std::string(effort_name(R{}.effort)));
  // The screen is a pass of the quick planner: asked for with another, it would do nothing.
  auto quick_only = [](const R& r) -> std::optional<std::string> {
    if (r.effort == PlannerEffort::quick) return std::nullopt;
    return "applies to --planner quick only (got --planner " + std::string(effort_name(r.effort)) +
           ")";
  };
  t.push_back(member("screen-evals", &R::screen_evals, "N",
                     "with --planner quick: plan every layout first with N evaluations (and at "
                     "most N/2 more polishing), then only those within --screen-margin-pct of "
                     "the fastest with the whole quick budget, each keeping the faster of its "
                     "two plans (0: every layout with the whole budget)"));
  t.back().applies = "--planner quick";
  t.back().refuses = quick_only;
  t.push_back(
      setter<R>("screen-margin-pct", OptionKind::number, "PCT",
                "percent above the fastest screened time within which a layout is planned again",
                [](R& r, OptionValue v) { r.screen_margin = std::get<double>(v) / 100.0; }));
  t.back().default_value = OptionValue(R{}.screen_margin * 100.0);
  t.back().applies = "--planner quick";
  t.back().refuses = quick_only;
  t.push_back(member("max-evals", &R::max_evals, "N",
                     "evaluations of the whole search (default: no bound). Layouts are kept in "
                     "enumeration order while their evaluations fit; the rest are reported as "
                     "cut by 'evaluation limit'. Deterministic: the answer does not depend on "
                     "--threads"));
  t.push_back(member("layout-evals", &R::layout_evals, "N",
                     "planner budget per layout with --planner full (and --refine)"));
  t.push_back(setter<R>(
      "no-bound", OptionKind::flag, "",
      "plan every layout. By default (--planner quick or full) layouts are planned in the "
      "order of a lower bound on their time that needs no simulation, and one whose bound "
      "exceeds the best time planned before it is skipped (filter 'bound'): the same best "
      "layout, fewer evaluations, the same answer under any --threads or mpirun",
      [](R& r, OptionValue v) { r.bound = !std::get<bool>(v); }));
  t.push_back(member("refine", &R::refine, "K",
                     "then plan the best K layouts again with the full planner (--layout-evals "
                     "each), each keeping the faster of its two plans"));
  t.push_back(member("time-limit-s", &R::time_limit_s, "S",
                     "wall-clock seconds of the whole search: no layout starts after it, and a "
                     "layout's planner gets what is left (results then depend on the machine)"));
  t.push_back(member("memory-limit-GiB", &R::memory_limit_GiB, "GiB",
                     "GiB a device may use (replaces its capacity)"));
  t.push_back(member("margin-GiB", &R::margin_GiB, "GiB",
                     "GiB kept free below the limit (the capacity or --memory-limit-GiB), as "
                     "plan's"));
  t.push_back(member("seed", &R::seed, "N", "planner seed"));
  t.push_back(member("threads", &R::threads, "N", "layouts evaluated at once per process"));
  t.back().default_text = "all cores";
  append_on(t, batch_and_set_options(), &R::overrides);
  return t;
}

RequestTable<SimulateRequest> simulate_options() {
  using R = SimulateRequest;
  RequestTable<R> t;
  t.push_back(setter<R>(
      "schedule", OptionKind::text, "NAME",
      "schedule to run, overriding training.schedule (" + schedule_names() + ")",
      [](R& r, OptionValue v) { r.overrides.schedule = std::get<std::string>(std::move(v)); }));
  t.push_back(member("schedule-file", &R::schedule_file, "FILE",
                     "replay the op order in FILE (torch.distributed.pipelining compute-only CSV: "
                     "one row per rank, e.g. 0F0,0F1,0I0,0W0); pp becomes the number of rows"));
  append_on(t, override_options("chunks per device, overriding training.vpp"), &R::overrides);
  return t;
}

RequestTable<CompareRequest> compare_options() {
  using R = CompareRequest;
  RequestTable<R> t;
  t.push_back(member("schedules", &R::schedules, "LIST",
                     "comma-separated schedules to run (" + schedule_names() + ")"));
  t.back().default_value.reset();  // required: no default
  append_on(t, override_options("chunks per device for schedules that take vpp (interleaved)"),
            &R::overrides);
  return t;
}

RequestTable<ExportCommandRequest> export_options() {
  using R = ExportCommandRequest;
  RequestTable<R> t;
  t.push_back(setter<R>(
      "format", OptionKind::text, "FORMAT",
      "required: " + comma_list(export_formats()) +
          " (flags to append to a launch script, a YAML fragment to merge, a whole TOML, or a "
          "launch command)",
      [](R& r, OptionValue v) { r.request.format = std::get<std::string>(std::move(v)); }));
  t.push_back(setter<R>(
      "schedule", OptionKind::text, "NAME",
      "the config's schedule, overriding training.schedule (" + schedule_names() + ")",
      [](R& r, OptionValue v) { r.overrides.schedule = std::get<std::string>(std::move(v)); }));
  t.push_back(
      setter<R>("memory-limit-GiB", OptionKind::number, "GiB",
                "GiB a device may use when a recompute rule is chosen (default: its capacity)",
                [](R& r, OptionValue v) { r.request.memory_limit_GiB = std::get<double>(v); }));
  append_on(t, override_options("chunks per device, overriding training.vpp"), &R::overrides);
  return t;
}

RequestTable<ReportRequest> report_options() {
  using R = ReportRequest;
  RequestTable<R> t;
  // --schedule is the run's, and with --plan the schedule planned for ("auto" too):
  // finish_report_request gives it to the plan.
  t.push_back(
      setter<R>("schedule", OptionKind::text, "NAME",
                "schedule to run (and, with --plan, to plan for; 'auto' plans every schedule plan "
                "--schedule auto plans, and the run then keeps training.schedule), overriding "
                "training.schedule (" +
                    schedule_names() + ")",
                [](R& r, OptionValue v) {
                  r.simulate.overrides.schedule = std::get<std::string>(std::move(v));
                }));
  t.back().refuses = [](const R& r) -> std::optional<std::string> {
    if (r.simulate.overrides.schedule == "auto" && !r.plan)
      return "'auto' plans every schedule: it needs --plan";
    return std::nullopt;
  };
  t.push_back(setter<R>(
      "schedule-file", OptionKind::text, "FILE",
      "replay the op order in FILE, as simulate does (not with --plan)",
      [](R& r, OptionValue v) { r.simulate.schedule_file = std::get<std::string>(std::move(v)); }));
  t.back().refuses = [](const R& r) -> std::optional<std::string> {
    if (!r.plan) return std::nullopt;
    return "a schedule file fixes an op order made for another partition: it cannot be "
           "planned for (drop --plan or the file)";
  };
  t.push_back(setter<R>("compare", OptionKind::name_list, "LIST",
                        "add the comparison of these schedules (as `bmpipe compare --schedules "
                        "LIST`): the table and a bar chart, fastest first",
                        [](R& r, OptionValue v) {
                          r.compare.emplace();
                          r.compare->schedules = std::get<std::vector<std::string>>(std::move(v));
                        }));
  t.push_back(setter<R>("plan", OptionKind::flag, "",
                        "add a plan (as `bmpipe plan`): plan against the baselines, each stage's "
                        "layers and recompute as a strip, and the Megatron-LM and MindFormers "
                        "export snippets",
                        [](R& r, OptionValue v) {
                          if (std::get<bool>(v)) r.plan.emplace();
                        }));
  t.push_back(setter<R>("search", OptionKind::flag, "",
                        "add a layout search (as `bmpipe search`, every default layout): a "
                        "scatter of time against peak memory, coloured by schedule, the winner "
                        "marked",
                        [](R& r, OptionValue v) {
                          if (std::get<bool>(v)) r.search.emplace();
                        }));
  // The budgets after --plan and --search (the table's order is the order they are set
  // in): each goes to those of the two asked for, and is ignored without either.
  auto both = [](R& r, auto set) {
    if (r.plan) set(*r.plan);
    if (r.search) set(*r.search);
  };
  t.push_back(setter<R>("memory-limit-GiB", OptionKind::number, "GiB",
                        "--plan and --search: GiB a device may use (replaces its capacity)",
                        [both](R& r, OptionValue v) {
                          both(r, [&](auto& q) { q.memory_limit_GiB = std::get<double>(v); });
                        }));
  t.push_back(setter<R>("margin-GiB", OptionKind::number, "GiB",
                        "--plan and --search: GiB kept free below the limit",
                        [both](R& r, OptionValue v) {
                          both(r, [&](auto& q) { q.margin_GiB = std::get<double>(v); });
                        }));
  t.back().default_value = OptionValue(PlanRequest{}.margin_GiB);
  t.push_back(setter<R>("max-evals", OptionKind::int64, "N",
                        "--plan: simulations the plan search may run (default " +
                            std::to_string(PlanRequest{}.max_evals) +
                            "); --search: evaluations of the whole search (default: no bound)",
                        [both](R& r, OptionValue v) {
                          both(r, [&](auto& q) { q.max_evals = std::get<std::int64_t>(v); });
                        }));
  t.push_back(setter<R>("time-limit-s", OptionKind::number, "SECONDS",
                        "--plan and --search: stop each after this many seconds (results then "
                        "depend on the machine)",
                        [both](R& r, OptionValue v) {
                          both(r, [&](auto& q) { q.time_limit_s = std::get<double>(v); });
                        }));
  t.push_back(setter<R>("planner", OptionKind::text, "EFFORT",
                        "--search: off, quick or full, as search --planner",
                        [](R& r, OptionValue v) {
                          if (r.search) r.search->effort = planner_effort(std::get<std::string>(v));
                        }));
  t.back().default_value = OptionValue(std::string(effort_name(SearchRequest{}.effort)));
  t.push_back(setter<R>("seed", OptionKind::uint64, "N", "--plan and --search: seed of the planner",
                        [both](R& r, OptionValue v) {
                          both(r, [&](auto& q) { q.seed = std::get<std::uint64_t>(v); });
                        }));
  t.back().default_value = OptionValue(PlanRequest{}.seed);
  t.push_back(setter<R>(
      "threads", OptionKind::int32, "N", "--plan and --search: threads that simulate",
      [both](R& r, OptionValue v) { both(r, [&](auto& q) { q.threads = std::get<int>(v); }); }));
  t.back().default_value = OptionValue(PlanRequest{}.threads);
  t.back().default_text = "all cores";
  RequestTable<Overrides> overrides =
      override_options("chunks per device, overriding training.vpp");
  for (RequestOption<Overrides>& row : overrides) {
    RequestOption<R> o;
    static_cast<OptionSpec&>(o) = row;
    o.set = [set = row.set](R& r, OptionValue v) { set(r.simulate.overrides, std::move(v)); };
    t.push_back(std::move(o));
  }
  return t;
}

void finish_report_request(ReportRequest& request) {
  Overrides& run = request.simulate.overrides;
  if (request.compare) {
    request.compare->overrides = run;
    request.compare->overrides.schedule.reset();
  }
  if (request.plan) request.plan->overrides = run;   // the schedule planned for, "auto" too
  if (run.schedule == "auto") run.schedule.reset();  // the run keeps training.schedule
  check_simulate_request(request.simulate);
  if (request.compare) try {
      check_compare_request(*request.compare);
    } catch (const RequestError& e) {
      throw RequestError("--compare", e.message());  // report's name for the list
    }
  if (request.plan) check_plan_request(*request.plan);
  if (request.search) check_search_request(*request.search);
}

// ---- the docs' lists ---------------------------------------------------------------------

std::string options_markdown(const std::vector<OptionSpec>& options, bool python) {
  std::string out = python ? "| keyword | default | applies | what |\n|---|---|---|---|\n"
                           : "| option | default | applies | what |\n|---|---|---|---|\n";
  for (const OptionSpec& o : options) {
    // A '|' in a cell (auto|none), even in code, would end it.
    auto cell = [](std::string text) {
      for (std::size_t at = 0; (at = text.find('|', at)) != std::string::npos; at += 2)
        text.replace(at, 1, "\\|");
      return text;
    };
    out += "| `" +
           cell(python ? python_name(o.name)
                       : "--" + o.name + (o.value_name.empty() ? "" : " " + o.value_name)) +
           "` | " + default_shown(o) + " | " +
           (o.applies.empty() ? "" : "with `" + o.applies + "`") + " | " + cell(o.help) + " |\n";
  }
  return out;
}

std::string with_option_tables(const std::string& page) {
  const std::string open = "<!-- options: ", close = "<!-- /options -->";
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t start = page.find(open, at);
    if (start == std::string::npos) break;
    const std::size_t name_end = page.find(" -->\n", start);
    const std::size_t end = page.find(close, start);
    if (name_end == std::string::npos || end == std::string::npos || end < name_end)
      throw std::invalid_argument("an options block is not closed by " + close);
    const std::string name = page.substr(start + open.size(), name_end - start - open.size());
    // NAME is a command, or python-COMMAND for its keywords (Python's export_config is
    // python-export).
    const bool python = name.rfind("python-", 0) == 0;
    const std::string command = python ? name.substr(7) : name;
    std::optional<std::vector<OptionSpec>> rows;
    if (command == "plan") rows = specs(plan_options());
    if (command == "search") rows = specs(search_options());
    if (command == "simulate") rows = specs(simulate_options());
    if (command == "compare") rows = specs(compare_options());
    if (command == "export") rows = specs(export_options());
    if (command == "report") rows = specs(report_options());
    if (command == "cost") rows = specs(override_options(kCostVppHelp));
    if (!rows)
      throw std::invalid_argument("unknown options block '" + name +
                                  "' (a command: plan, search, simulate, compare, export, "
                                  "report or cost, or python-COMMAND)");
    const std::string table = options_markdown(*rows, python);
    out += page.substr(at, name_end + 5 - at) + table;
    out += close;
    at = end + close.size();
  }
  return out + page.substr(at);
}

}  // namespace bmpipe::api
