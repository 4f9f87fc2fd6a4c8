#include "planner/layout_search.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "experiment/parallel_mesh.hpp"
#include "planner/layout_bound.hpp"
#include "sim/units.hpp"

namespace bmpipe {

namespace {

std::string gib(std::int64_t bytes) {
  return format_bytes(bytes, 1, ByteUnit::GiB);
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

/// The global batch the search keeps fixed: training.global_batch_size, or the config's
/// micro-batches x micro-batch size x dp.
std::int64_t global_batch(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.global_batch_size) return *t.global_batch_size;
  return static_cast<std::int64_t>(t.microbatches) * t.micro_batch_size *
         t.data_parallel(c.devices());
}

LayoutResult refused(const Layout& l, std::string filter, std::string why) {
  LayoutResult r;
  r.layout = l;
  r.filter = std::move(filter);
  r.rejected = std::move(why);
  return r;
}

/// Filter: weights, gradients and optimizer state alone. The layers must go somewhere,
/// so some rank holds at least 1/pp of them.
std::optional<LayoutResult> static_memory_refusal(const Experiment& e, const Layout& l,
                                                  std::int64_t limit) {
  std::int64_t total = e.layers.head_copy_static_bytes;
  for (const LayerRow& row : e.layers.layers) total += row.static_bytes;
  const std::int64_t least = e.reserved_bytes + (total + l.pp - 1) / l.pp;
  if (least > limit)
    return refused(l, "static-memory",
                   "weights, gradients and optimizer state need at least " + gib(least) +
                       " per device of " + gib(limit));
  return std::nullopt;
}

/// The experiment of one layout (layout_config, prepared): offload alone keeps the none
/// and offload modes only (offload_only). `microbatches` gets the layout's.
std::shared_ptr<const Experiment> prepare_layout(const Config& base, const Layout& l,
                                                 const std::shared_ptr<const Topology>& topology,
                                                 int* microbatches) {
  const Config c = layout_config(base, l);
  *microbatches = c.training.microbatches;
  std::shared_ptr<const Experiment> e = prepare(c, topology);
  if (l.offload_form == OffloadForm::only) e = offload_only(*e);
  return e;
}

}  // namespace

std::shared_ptr<const Experiment> offload_only(const Experiment& e) {
  auto out = std::make_shared<Experiment>(e);
  for (LayerRow& row : out->layers.layers)
    for (const Recompute m : kAllModes)
      if (m != Recompute::none && m != Recompute::offload) row.modes[m].reset();
  return out;
}

LayoutScreen screen_layout(const Config& base, const Layout& l, const PlannerOptions& options,
                           const std::shared_ptr<const Topology>& topology) {
  LayoutScreen out;
  std::shared_ptr<const Experiment> e;
  try {
    e = prepare_layout(base, l, topology, &out.microbatches);
  } catch (const ConfigError& err) {
    out.refused = refused(l, "config", err.message());
    return out;
  }
  const std::int64_t limit =
      options.memory_limit_bytes > 0 ? options.memory_limit_bytes : e->capacity_bytes;
  if ((out.refused = static_memory_refusal(*e, l, limit))) return out;
  try {
    out.bound = layout_lower_bound(*e, bound_shape(*e), limit).total();
  } catch (const ConfigError&) {
    out.bound = 0;  // evaluate_layout reports the schedule's refusal as it always has
  }
  return out;
}

std::string to_string(const Layout& l) {
  std::string out = "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " dp " +
                    std::to_string(l.dp) + " vpp " + std::to_string(l.vpp) + " mbs " +
                    std::to_string(l.micro_batch_size) + " " + l.schedule;
  if (l.ep != 1 || l.etp != 1)
    out += " ep " + std::to_string(l.ep) + " etp " + std::to_string(l.etp);
  if (l.cp != 1) out += " cp " + std::to_string(l.cp);
  if (!l.offload.empty()) out += " offload " + l.offload;
  if (!l.offload.empty() && l.offload_lead >= 0) out += " lead " + std::to_string(l.offload_lead);
  if (l.offload_form == OffloadForm::per_layer) out += " per layer";
  if (l.offload_form == OffloadForm::only) out += " only";
  return out;
}

Config layout_config(const Config& base, const Layout& l) {
  Config c = base;
  TrainingConfig& t = c.training;
  t.schedule = l.schedule;
  t.tp = l.tp;
  t.pp = l.pp;
  t.dp = l.dp;
  t.vpp = l.vpp;
  t.micro_batch_size = l.micro_batch_size;
  t.ep = l.ep;
  t.etp = l.etp;
  t.cp = l.cp;
  if (!l.offload.empty()) {
    t.offload_modules = l.offload;
    c.lines["training.offload_modules"] = 0;
  }
  if (l.offload_lead >= 0) {
    t.offload_lead = l.offload_lead;
    c.lines["training.offload_lead"] = 0;
  }
  // TransformerEngine's tp overlap hides tp collectives; a tp-1 layout has none, and
  // Megatron-LM (and check_config) refuse the flag there, so that layout is the job without
  // it, as its export writes it.
  if (l.tp == 1) t.tp_comm_overlap = false;
  // Megatron-LM refuses a mixture-of-experts model at tp > 1 without sequence parallelism
  // (experiment/rules_megatron.cpp quotes it), and without it every
  // tp rank would run the experts on the whole sequence. Such a layout is the job Megatron
  // runs, with --sequence-parallel (its export writes the flag), not a refused one.
  if (l.tp > 1 && c.model.shape && c.model.shape->is_moe()) t.sequence_parallel = true;
  t.global_batch_size = static_cast<int>(global_batch(base));
  t.microbatches_given = false;
  t.partition.clear();  // the planner (or a uniform split) decides
  // So does a Megatron layout: it fixes one pp x vpp.
  t.megatron_layout.clear();
  // Per-stage and per-layer recompute keys belong to another layout's stages.
  t.recompute.stages.clear();
  t.recompute.layers.clear();
  // The per-layer offload forms: as plan --offload auto plans them (offload alone drops the
  // recompute modes from the prepared rows: prepare_layout).
  if (l.offload_form != OffloadForm::job) {
    t.recompute = RecomputeSpec::per_layer_offload();
    c.lines["training.recompute"] = 0;
  }
  for (const char* key :
       {"training.tp", "training.pp", "training.dp", "training.vpp", "training.micro_batch_size",
        "training.schedule", "training.ep", "training.etp", "training.cp"})
    c.lines[key] = 0;
  resolve_batch(c);
  check_config(c);
  return c;
}

std::vector<Layout> enumerate_layouts(const Config& c, const LayoutSpace& space,
                                      std::vector<LayoutResult>* rejected) {
  const int devices = c.devices();
  const int layers = c.model.num_layers();
  const bool analytic = c.model.analytic();
  const std::int64_t gbs = global_batch(c);
  auto fail = [&](const std::string& option, const std::string& why) {
    throw ConfigError(c.file, 0, option, why);
  };
  for (const auto& [name, list] : std::vector<std::pair<const char*, std::vector<int>>>{
           {"--tp", space.tp},
           {"--pp", space.pp},
           {"--vpp", space.vpp},
           {"--micro-batch-size", space.micro_batch_size},
           {"--ep", space.ep},
           {"--etp", space.etp},
           {"--cp", space.cp}})
    for (int v : list)
      if (v < 1) fail(name, "values must be at least 1 (got " + std::to_string(v) + ")");

  // tp: powers of two up to a node, dividing the heads and the FFN (analytic models); the
  // config's own for measured layers, whose costs were measured at one tp.
  std::vector<int> tps = space.tp;
  if (tps.empty()) {
    if (!analytic)
      tps = {c.training.tp};
    else
      for (int t = 1; t <= c.cluster.devices_per_node; t *= 2) tps.push_back(t);
  }
  if (!analytic)
    for (int t : tps)
      if (t != c.training.tp)
        fail("--tp", "measured layer costs hold for the config's tp " +
                         std::to_string(c.training.tp) + " only");
  std::vector<int> valid_tp;
  for (int t : tps) {
    // The config's own rules (ParallelMesh), at pp 1: the model's, when broken, are said
    // rather than the devices'.
    MeshSizes sizes;
    sizes.tp = t;
    std::optional<MeshViolation> broken = ParallelMesh::device_violation(sizes, devices);
    if (analytic)
      if (auto model = ParallelMesh::model_violation(sizes, c.model.shape->num_attention_heads,
                                                     c.model.shape->ffn_hidden_size))
        broken = model;
    if (!broken)
      valid_tp.push_back(t);
    else if (!space.tp.empty() && space.tp.size() == 1)
      fail("--tp", broken->layout_message());
  }
  if (valid_tp.empty()) fail("--tp", "no tp of the list divides the devices, heads and FFN size");

  std::vector<int> mbss = space.micro_batch_size;
  if (mbss.empty())
    mbss = analytic ? std::vector<int>{1, 2, 4} : std::vector<int>{c.training.micro_batch_size};
  if (!analytic)
    for (int b : mbss)
      if (b != c.training.micro_batch_size)
        fail("--micro-batch-size", "measured layer costs hold for the config's micro-batch size " +
                                       std::to_string(c.training.micro_batch_size) + " only");
  std::vector<std::string> schedules = space.schedules;
  if (schedules.empty()) schedules = search_default_schedules();
  for (const std::string& s : schedules)
    if (!find_schedule(s)) fail("--schedules", unknown_schedule_message(s));

  // ep and etp: mixture-of-experts models only.
  const bool moe = analytic && c.model.shape->is_moe();
  std::vector<int> eps = space.ep, etps = space.etp;
  if (!moe) {
    for (const auto& [name, list] :
         std::vector<std::pair<const char*, std::vector<int>>>{{"--ep", eps}, {"--etp", etps}})
      for (int v : list)
        if (v != 1)
          fail(name, std::to_string(v) + ", but " +
                         (analytic ? c.model.shape->name : std::string("a measured model")) +
                         " has no experts (a dense model): only 1");
    eps = {1}, etps = {1};
  } else {
    if (eps.empty()) eps = divisors(c.model.shape->moe.num_experts);
    if (etps.empty()) etps = {1};
  }

  // cp: 1 unless asked (the config's own for measured layers, whose costs were measured
  // at one cp). A cp the sequence cannot be cut for holds in no layout: a bad value.
  // A hierarchical cp (cp_comm_type a2a+p2p) is searched at its own cp_hierarchy: the
  // search does not enumerate hierarchies.
  const bool hierarchy = c.training.cp_comm() == CpComm::a2a_p2p;
  std::vector<int> cps = space.cp;
  if (cps.empty()) cps = {analytic && !hierarchy ? 1 : c.training.cp};
  for (int cp : cps) {
    if (!analytic && cp != c.training.cp)
      fail("--cp", "measured layer costs hold for the config's cp " +
                       std::to_string(c.training.cp) + " only");
    if (hierarchy && cp != c.training.cp)
      fail("--cp", "cp " + std::to_string(cp) +
                       ": a hierarchical cp (cp_comm_type a2a+p2p) is searched at its "
                       "training.cp_hierarchy's cp " +
                       std::to_string(c.training.cp) + " only");
    // The config's own rule (experiment/parallel_mesh.hpp).
    if (analytic)
      if (const auto problem = cp_split_problem(*c.training.seq_length, cp)) fail("--cp", *problem);
  }

  std::vector<Layout> out;
  bool any_batch = false, any_pp = false, any_cp = false;
  for (int tp : valid_tp) {
    std::vector<int> pps = space.pp;
    if (pps.empty())
      for (int p : divisors(devices / tp))
        if (p <= layers) pps.push_back(p);
    for (int pp : pps) {
      // The config's own rules (ParallelMesh::device_violation), cp still 1.
      MeshSizes sizes;
      sizes.tp = tp, sizes.pp = pp;
      if (const auto broken = ParallelMesh::device_violation(sizes, devices)) {
        if (rejected)
          rejected->push_back(
              refused(Layout{tp, pp, 0, 1, 1, ""}, "divisibility", broken->layout_message()));
        continue;
      }
      any_pp = true;
      for (int cp : cps) {
        Layout shape{tp, pp, 0, 1, 1, ""};
        shape.cp = cp;
        // The cp ranks come out of what would be dp.
        sizes.cp = cp;
        if (const auto broken = ParallelMesh::device_violation(sizes, devices)) {
          if (rejected)
            rejected->push_back(refused(shape, "divisibility", broken->layout_message()));
          continue;
        }
        // Ulysses (cp_comm_type a2a) splits a tp rank's heads over the cp group, a2a+p2p
        // over its all-to-all level.
        if (analytic && c.training.cp_comm() != CpComm::p2p) {
          const int a2a = c.training.cp_comm() == CpComm::a2a ? cp : c.training.cp_a2a_ranks();
          if (const auto problem =
                  ulysses_heads_problem(c.model.shape->num_attention_heads, tp, a2a)) {
            if (rejected)
              rejected->push_back(refused(shape, "divisibility", "cp_comm_type " + *problem));
            continue;
          }
        }
        any_cp = true;
        const int dp = ParallelMesh(sizes, devices, c.cluster.domain()).dp();
        for (int mbs : mbss) {
          Layout base{tp, pp, dp, 1, mbs, ""};
          base.cp = cp;
          if (gbs % (static_cast<std::int64_t>(mbs) * dp) != 0) {
            if (rejected)
              rejected->push_back(refused(base, "divisibility",
                                          "micro-batch size x dp = " + std::to_string(mbs * dp) +
                                              " does not divide the global batch " +
                                              std::to_string(gbs)));
            continue;
          }
          any_batch = true;
          const int m = static_cast<int>(gbs / (static_cast<std::int64_t>(mbs) * dp));
          for (const std::string& name : schedules) {
            const ScheduleInfo& info = *find_schedule(name);
            // --vpp as given; otherwise the rule plan --schedule auto follows.
            const std::vector<int> vpps = info.placement == Placement::kLoop && !space.vpp.empty()
                                              ? space.vpp
                                              : default_vpps(info, pp, layers);
            for (int v : vpps) {
              Layout l = base;
              l.vpp = v;
              l.schedule = name;
              std::string why;
              if (pp * v > layers)
                why = "pp x vpp = " + std::to_string(pp * v) + " stages, more than the " +
                      std::to_string(layers) + " layers";
              else {
                try {
                  check_params(info, ScheduleParams{pp, m, v, {}, {}});
                } catch (const ScheduleError& e) {
                  why = e.what();
                }
              }
              if (!why.empty()) {
                if (rejected) rejected->push_back(refused(l, "divisibility", why));
                continue;
              }
              for (int ep : eps)
                for (int etp : etps) {
                  Layout x = l;
                  x.ep = ep;
                  x.etp = etp;
                  if (moe) {
                    // The config's own rules decide (check_config, via layout_config): a
                    // layout they refuse for ep or etp cannot hold its experts.
                    try {
                      layout_config(c, x);
                    } catch (const ConfigError& err) {
                      // layout_config sets ep and etp as command-line overrides.
                      if (err.key().rfind("training.ep", 0) == 0 ||
                          err.key().rfind("training.etp", 0) == 0) {
                        if (rejected) rejected->push_back(refused(x, "experts", err.message()));
                        continue;
                      }
                    }
                  }
                  if (space.offload.empty()) out.push_back(x);
                  for (const LayoutSpace::OffloadChoice& o : space.offload) {
                    x.offload = o.modules;
                    x.offload_lead = o.lead;
                    x.offload_form = o.form;
                    out.push_back(x);
                  }
                }
            }
          }
        }
      }
    }
  }
  if (any_pp && !any_cp)
    fail("--cp", "no tp x pp x cp of the lists divides the " + std::to_string(devices) +
                     " devices (or, with cp_comm_type a2a or a2a+p2p, a tp rank's heads)");
  if (!any_batch)
    c.fail(c.training.global_batch_size ? "training.global_batch_size" : "training.microbatches",
           "the global batch " + std::to_string(gbs) +
               " is not a multiple of micro-batch size x dp for any layout tried");
  return out;
}

LayoutResult evaluate_layout(const Config& base, const Layout& l, PlannerEffort effort,
                             const PlannerOptions& options, std::int64_t quick_evals,
                             std::optional<std::int64_t> quick_total,
                             const std::shared_ptr<const Topology>& topology) {
  LayoutResult r;
  r.layout = l;
  std::shared_ptr<const Experiment> e;
  try {
    e = prepare_layout(base, l, topology, &r.microbatches);
  } catch (const ConfigError& err) {
    return refused(l, "config", err.message());
  }
  const std::int64_t limit =
      options.memory_limit_bytes > 0 ? options.memory_limit_bytes : e->capacity_bytes;
  r.capacity_bytes = limit;
  if (std::optional<LayoutResult> no = static_memory_refusal(*e, l, limit)) return *no;
  PlanRun run;
  try {
    if (effort == PlannerEffort::off) {
      const Schedule sch = make_schedule(*e);
      run.plan = config_plan(*e, sch.num_stages);
      run.schedule = sch;
      run.result = bmpipe::run(*e, run.plan, sch, {limit, nullptr});
      r.evaluations = 1;
    } else {
      PlannerOptions o = options;
      o.schedule = l.schedule;
      o.vpp = l.vpp;
      o.memory_limit_bytes = limit;
      o.exhaustive_limit = 0;  // many layouts: the baselines' exhaustive sweep would dominate
      if (effort == PlannerEffort::quick) o.max_evals = quick_evals, o.total_evals = quick_total;
      o.progress = nullptr;
      const PlanOutcome out = plan_pipeline(*e, o);
      run = out.best;
      r.evaluations = out.stats.evaluations;
    }
  } catch (const ConfigError& err) {
    return refused(l, "config", err.message());
  }
  r.plan = run.plan;
  if (!run.result.ok) return refused(l, "simulation", run.result.error);
  r.fits = run.result.fits;
  r.iteration_time = run.result.iteration_time;
  r.bubble_ratio = run.result.bubble_ratio;
  for (const DeviceResult& d : run.result.devices)
    r.max_peak_bytes = std::max(r.max_peak_bytes, d.peak_bytes);
  const Throughput t =
      throughput(make_run_info(*e, run.plan, run.schedule), run.result.iteration_time);
  r.tokens_per_s = t.tokens_per_s.value_or(0);
  r.mfu = t.mfu.value_or(0);
  r.tflops_per_device = t.tflops_per_device.value_or(0);
  if (!r.fits) {
    int worst = 0;
    for (const DeviceResult& d : run.result.devices)
      if (d.peak_bytes - d.capacity_bytes >
          run.result.devices[worst].peak_bytes - run.result.devices[worst].capacity_bytes)
        worst = d.rank;
    r.filter = "memory";
    r.rejected = "stage " + std::to_string(worst) + " needs " +
                 gib(run.result.devices[worst].peak_bytes) + " of " + gib(limit);
  }
  return r;
}

void rank_layouts(std::vector<LayoutResult>& results) {
  std::stable_sort(
      results.begin(), results.end(), [](const LayoutResult& a, const LayoutResult& b) {
        const bool fa = a.rejected.empty() && a.fits, fb = b.rejected.empty() && b.fits;
        if (fa != fb) return fa;
        if (!fa) return false;
        return a.iteration_time < b.iteration_time;
      });
}

}  // namespace bmpipe
