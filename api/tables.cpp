#include "api/tables.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <sstream>

#include "api/summary.hpp"
#include "planner/planner.hpp"
#include "sim/units.hpp"

namespace bmpipe::api {

namespace {

std::string ms(Time t) {
  return format_ms(t, 3);
}

/// The run as a table: one row per stage, then the totals.
std::string plan_table(const Experiment& e, const PlanRun& run, std::int64_t limit) {
  std::ostringstream out;
  const std::vector<StageInfo> stages = stage_info(e, run.plan);
  const SimInput in = assemble(e, run.plan, run.schedule);
  char buf[256];
  // Layers per recompute mode, one column each.
  std::snprintf(buf, sizeof buf, "%5s %4s %11s", "stage", "rank", "layers");
  out << buf;
  const std::vector<Recompute> modes = e.layers.modes();
  for (Recompute r : modes) {
    std::snprintf(buf, sizeof buf, " %5s", std::string(recompute_column(r)).c_str());
    out << buf;
  }
  std::snprintf(buf, sizeof buf, " %10s %10s %24s\n", "F ms/mb", "B ms/mb", "peak mem / limit");
  out << buf;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageInfo& st = stages[s];
    const int rank = run.schedule.stage_rank[s];
    const StageCost& c = in.stages[s];
    const std::string layers = st.num_layers == 0
                                   ? "-"
                                   : std::to_string(st.first_layer) + "-" +
                                         std::to_string(st.first_layer + st.num_layers - 1);
    const std::string mem =
        run.result.ok ? format_gib(run.result.devices[rank].peak_bytes) + " / " + format_gib(limit)
                      : "-";
    std::snprintf(buf, sizeof buf, "%5zu %4d %11s", s, rank, layers.c_str());
    out << buf;
    for (Recompute r : modes) {
      std::snprintf(buf, sizeof buf, " %5d", st.modes[r]);
      out << buf;
    }
    std::snprintf(buf, sizeof buf, " %10s %10s %24s\n", ms(c.forward).c_str(),
                  ms(c.backward_full() + c.recompute).c_str(), mem.c_str());
    out << buf;
  }
  if (run.result.ok) {
    std::snprintf(buf, sizeof buf, "iteration time   %s ms   bubble ratio %.2f %%   %s\n",
                  ms(run.result.iteration_time).c_str(), 100.0 * run.result.bubble_ratio,
                  run.result.fits ? "fits" : "DOES NOT FIT");
    out << buf;
  } else {
    out << "simulation failed: " << run.result.error << "\n";
  }
  return out.str();
}

std::string baselines_table(const PlanOutcome& o, const PlanRun& run) {
  std::ostringstream out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "\n%-23s %14s %6s %9s\n", "baseline", "iteration ms", "fits",
                "speedup");
  out << buf;
  for (const BaselineRun& b : o.baselines) {
    if (!b.run) {
      out << "  " << b.name << ": " << b.error << "\n";
      continue;
    }
    const double speedup = run.result.iteration_time > 0
                               ? static_cast<double>(b.run->result.iteration_time) /
                                     static_cast<double>(run.result.iteration_time)
                               : 0.0;
    std::string note = b.error;
    if (!b.offload_modules.empty())
      note +=
          (note.empty() ? "" : "; ") + std::string("offloads ") + b.offload_modules + " at lead 1";
    if (!b.expressible)
      note += (note.empty() ? "" : "; ") + std::string("the framework cannot state it");
    std::snprintf(buf, sizeof buf, "%-23s %14s %6s %8.3fx%s\n", b.name.c_str(),
                  ms(b.run->result.iteration_time).c_str(), b.run->fits() ? "yes" : "NO", speedup,
                  note.empty() ? "" : ("   (" + note + ")").c_str());
    out << buf;
  }
  if (const BaselineRun* ref = megatron_reference(o); ref && run.result.iteration_time > 0) {
    std::snprintf(buf, sizeof buf,
                  "speedup over Megatron-LM: %.3fx against %s (the fastest megatron-* baseline "
                  "that fits)\n",
                  static_cast<double>(ref->run->result.iteration_time) /
                      static_cast<double>(run.result.iteration_time),
                  ref->name.c_str());
    out << buf;
  } else
    out << "speedup over Megatron-LM: none of the megatron-* baselines fits\n";
  return out.str();
}

std::int64_t max_peak(const SimResult& r) {
  std::int64_t peak = 0;
  for (const auto& d : r.devices) peak = std::max(peak, d.peak_bytes);
  return peak;
}

/// printf into `out`. A C variadic with the format attribute, so that both compilers check
/// every call's arguments against its format (and clang's -Wformat-security sees a format
/// it can check, not a forwarded pointer).
[[gnu::format(printf, 2, 3)]] void put(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list size_args;
  va_copy(size_args, args);
  const int n = std::vsnprintf(nullptr, 0, format, size_args);
  va_end(size_args);
  if (n > 0) {
    std::string text(static_cast<std::size_t>(n) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), format, args);
    text.pop_back();
    out += text;
  }
  va_end(args);
}

std::string mib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

}  // namespace

std::string plan_text(const std::string& file, const PlanRequest& request,
                      const PlanResults& planned, std::int64_t memory_limit) {
  std::ostringstream out;
  const std::vector<PlanOutcome>& outcomes = planned.outcomes;
  const PlanOutcome& top = outcomes.front();
  const PlanRun* shown = planned.shown;
  const int shown_vpp = shown->schedule.chunks_per_device();
  const std::string baseline = request.baseline.value_or("");
  const Experiment* e = planned.experiment.get();
  out << "bmpipe plan " << file << "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "schedule %s   pp %d   vpp %d   micro-batches %d   memory limit %s per device\n",
                top.schedule.c_str(), shown->schedule.num_ranks, shown_vpp,
                shown->schedule.num_microbatches, format_gib(memory_limit).c_str());
  out << buf;
  if (!baseline.empty()) out << "showing the " << baseline << " baseline\n";
  if (request.offload && *request.offload != "none") {
    const nlohmann::json& off = planned.summary["offload"];
    const std::string form = off["form"].get<std::string>();
    out << "activation offload: kept " << planned.offload_modules
        << (planned.offload_lead ? ", lead " + std::to_string(*planned.offload_lead) : "")
        << (form == "job" ? "" : " (" + form + ")") << " of\n";
    for (const auto& row : off["tried"]) {
      const std::string lead = row.contains("offload_lead")
                                   ? "lead " + std::to_string(row["offload_lead"].get<int>())
                                   : "";
      // The form, and how many layers a per-layer plan offloads.
      std::string how = row.contains("form") ? row["form"].get<std::string>() : "";
      if (row.contains("offload_layers")) {
        if (!how.empty()) how += ' ';
        how += std::to_string(row["offload_layers"].get<int>());
        how += " layers";
      }
      std::snprintf(buf, sizeof buf, "  %-58s %-7s %-20s ",
                    row["offload_modules"].get<std::string>().c_str(), lead.c_str(), how.c_str());
      out << buf;
      if (row.contains("iteration_time_ms")) {
        std::snprintf(buf, sizeof buf, "%.3f ms\n", row["iteration_time_ms"].get<double>());
        out << buf;
      } else {
        out << row["error"].get<std::string>() << "\n";
      }
    }
  }
  out << "\n" << plan_table(*e, *shown, memory_limit);
  out << baselines_table(top, *shown);
  if (outcomes.size() > 1) {
    out << "\nschedules planned (fastest first):\n";
    for (const PlanOutcome& oc : outcomes) {
      std::snprintf(buf, sizeof buf, "  %-12s vpp %d  ", oc.schedule.c_str(), oc.vpp);
      out << buf
          << (oc.best.fits() ? ms(oc.best.result.iteration_time) + " ms"
                             : "no fitting plan: " + oc.infeasible)
          << "\n";
    }
  }
  const SearchStats& s = top.stats;
  std::snprintf(buf, sizeof buf,
                "\nsearch: %lld evaluations, %lld cache hits, %lld filtered, %.2f s, %d threads, "
                "seed %llu, stopped by %s\n",
                static_cast<long long>(s.evaluations), static_cast<long long>(s.cache_hits),
                static_cast<long long>(s.filtered), s.wall_s, s.threads,
                static_cast<unsigned long long>(s.seed), s.stopped_by.c_str());
  out << buf;
  return out.str();
}

std::string cost_text(const Config& config, const CostOutcome& cost, bool with_ops) {
  std::string out;
  const Experiment& experiment = *cost.experiment;
  const AnalyticCosts& a = *experiment.analytic;
  const Schedule& schedule = cost.schedule;
  const std::vector<std::int64_t>& stage_static = cost.stage_static_bytes;
  const std::vector<double>& tail_ms = cost.tail_ms;
  const LayerCost& head = a.head_for(schedule.num_stages);
  const std::vector<int>& counts = cost.plan.partition;
  const ModelShape& m = *config.model.shape;

  put(out, "bmpipe cost %s\n", config.file.c_str());
  put(out, "model %s (%s, %d layers, h %d, %d heads / %d kv, ffn %d, vocab %d)\n",
      config.model.name.c_str(), to_string(m.architecture).c_str(), m.num_layers, m.hidden_size,
      m.num_attention_heads, m.num_kv_heads, m.ffn_hidden_size, m.vocab_size);
  put(out, "device %s   seq %d   micro-batch %d   tp %d%s   dp %d\n", a.hardware.name.c_str(),
      a.settings.seq_length, a.settings.micro_batch_size, a.settings.tp,
      !a.settings.sequence_parallel ? ""
      : a.settings.tp_comm_overlap  ? " (sequence parallel, collectives overlapped)"
                                    : " (sequence parallel)",
      a.dp);
  // Which kernels the llama layers' memory-bound sub-ops are costed with (training.kernels).
  if (m.architecture == Architecture::llama)
    put(out, "kernels %s\n",
        a.settings.kernels == Kernels::fused
            ? "fused (Megatron-Core / TransformerEngine)"
            : "eager (HF transformers; training.kernels: fused for "
              "Megatron-Core's)");
  if (m.is_moe()) {
    put(out, "experts %d (top %d, ffn %d, shared ffn %d%s)   ep %d   etp %d   edp %d\n",
        m.moe.num_experts, m.moe.top_k, m.moe.expert_ffn, m.moe.shared_ffn,
        m.moe.latent_size > 0 ? (", latent " + std::to_string(m.moe.latent_size)).c_str() : "",
        a.settings.ep, a.settings.etp, a.edp);
    // Where DeepEP sends a token (training.moe_dispatcher: deepep; deepep_fanout).
    if (a.settings.moe_dispatcher == MoeDispatcher::deepep && a.settings.ep > 1) {
      const DeepEpFanout f = deepep_fanout(m.moe, a.settings.ep, a.settings.ep_per_domain);
      put(out, "dispatch deepep: a token reaches %.2f of %g nodes and %.2f devices\n", f.nodes,
          static_cast<double>(a.settings.ep) / a.settings.ep_per_domain, f.ranks);
    }
  }
  // DeepSeek sparse attention (model.dsa): the share of the causal pairs its core keeps.
  if (m.is_dsa()) {
    const double s = a.settings.seq_length, k = std::min<double>(m.dsa.index_topk, s);
    put(out,
        "sparse attention: indexer %d heads of %d, top %d keys: the core keeps %.1f %% "
        "of the causal pairs; indexer %s\n",
        m.dsa.index_heads, m.dsa.index_head_dim, m.dsa.index_topk,
        100 * causal_attention_pairs(s, k) / causal_attention_pairs(s, 0),
        m.dsa.indexer_loss ? "trained (its KL loss)" : "frozen");
  }
  put(out, "per micro-batch, per device (ms; activations in MiB):\n\n");
  // Activations per mode, then the recompute time of each mode that recomputes.
  put(out, "%-10s %5s %9s %9s %9s", "layer", "count", "F", "I", "W");
  for (Recompute r : kAllRecompute)
    put(out, " %10s", ("act " + std::string(recompute_column(r))).c_str());
  for (Recompute r : kRecomputingModes)
    put(out, " %9s", ("rc " + std::string(recompute_column(r))).c_str());
  put(out, " %13s\n", "params");
  auto row = [&](const LayerCost& c, int count) {
    put(out, "%-10s %5d %9.3f %9.3f %9.3f", c.name.c_str(), count, c.forward_s * 1e3,
        c.backward_input_s * 1e3, c.backward_weight_s * 1e3);
    for (Recompute r : kAllRecompute) put(out, " %10s", mib(c.activation_bytes[r]).c_str());
    for (Recompute r : kRecomputingModes) put(out, " %9.3f", c.recompute_extra_s[r] * 1e3);
    put(out, " %13lld\n", static_cast<long long>(c.param_count));
    if (with_ops)
      for (const auto& op : c.ops)
        put(out, "  %-18s %9.3f %9.3f %9.3f  %s\n", op.name.c_str(), op.forward_s * 1e3,
            op.backward_input_s * 1e3, op.backward_weight_s * 1e3, kernel_class_name(op.kind));
  };
  row(a.embedding, 1);
  for (const auto& [kind, count] : a.layer_kinds(m)) row(*kind, count);
  if (a.mtp) row(*a.mtp, m.mtp_layers);
  row(head, 1);
  put(out, "\n%5s %7s %14s %12s %12s %12s %14s\n", "stage", "layers", "static", "weights", "grads",
      "optimizer", "dp+optimizer");
  for (int s = 0; s < schedule.num_stages; ++s) {
    const api::CostOutcome::StaticBreakdown& b = cost.stage_static_parts[s];
    put(out, "%5d %7d %14s %12s %12s %12s %11.3f ms\n", s, counts[s],
        format_gib(stage_static[s]).c_str(), format_gib(b.weights).c_str(),
        format_gib(b.grads).c_str(), format_gib(b.optimizer).c_str(),
        tail_ms[schedule.stage_rank[s]]);
  }
  put(out, "(static = weights + gradients + optimizer state%s; plus %s reserved per device)\n",
      a.settings.fp8 != Fp8::none ? " + FP8 weight copies" : "",
      format_gib(experiment.reserved_bytes).c_str());
  return out;
}

std::string compare_text(const std::string& file, const CompareOutcome& outcome) {
  std::ostringstream out;
  out << "bmpipe compare " << file << "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s %4s %16s %10s %14s %5s\n", "schedule", "vpp",
                "iteration ms", "bubble %", "max peak mem", "fits");
  out << buf;
  for (const auto& r : outcome.rows) {
    if (!r.refused.empty()) {
      out << r.info.schedule << "  REFUSED: " << r.refused << "\n";
      continue;
    }
    if (!r.result.ok) {
      out << r.info.schedule << "  FAILED: " << r.result.error << "\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, "%-12s %4d %16.3f %10.2f %14s %5s\n", r.info.schedule.c_str(),
                  r.info.vpp, ns_to_ms(r.result.iteration_time), 100.0 * r.result.bubble_ratio,
                  format_gib(max_peak(r.result)).c_str(), r.result.fits ? "yes" : "NO");
    out << buf;
  }
  return out.str();
}

}  // namespace bmpipe::api
