#include "api/summary.hpp"

#include <cstdio>

#include "sim/units.hpp"

namespace bmpipe {

std::string format_gib(std::int64_t bytes) {
  return format_bytes(bytes, 2, ByteUnit::GiB);
}

nlohmann::json summary_json(const RunInfo& info, const SimResult& r,
                            const BubbleBreakdown* bubbles) {
  nlohmann::json j;
  j["schedule"] = info.schedule;
  j["pp"] = info.pp;
  j["vpp"] = info.vpp;
  j["microbatches"] = info.microbatches;
  // The layout that ran, resolved (dp derived, partition and recompute per stage decided).
  j["tp"] = info.tp;
  j["dp"] = info.dp;
  if (info.idle_devices > 0) j["idle_devices"] = info.idle_devices;
  j["micro_batch_size"] = info.micro_batch_size;
  j["global_batch_size"] =
      static_cast<std::int64_t>(info.microbatches) * info.micro_batch_size * info.dp;
  if (!info.partition.empty()) j["partition"] = info.partition;
  if (!info.stage_recompute.empty()) j["recompute_per_stage"] = info.stage_recompute;
  j["ok"] = r.ok;
  if (!r.ok) {
    j["error"] = r.error;
    nlohmann::json blocked = nlohmann::json::array();
    for (const auto& b : r.blocked)
      blocked.push_back({{"rank", b.rank},
                         {"position", b.position},
                         {"op", to_string(b.op)},
                         {"waiting_for", b.waiting_for}});
    j["blocked"] = blocked;
    return j;
  }
  j["iteration_time_ms"] = ns_to_ms(r.iteration_time);
  j["pipeline_time_ms"] = ns_to_ms(r.pipeline_time);
  j["bubble_ratio"] = r.bubble_ratio;
  j["fits"] = r.fits;
  j["ops_executed"] = r.ops_executed;
  const Throughput t = throughput(info, r.iteration_time);
  if (t.tokens_per_s) j["tokens_per_s"] = *t.tokens_per_s;
  if (t.mfu) {
    j["mfu"] = *t.mfu;
    j["tflops_per_device"] = *t.tflops_per_device;
  }
  if (t.mfu_at_gemm_peak) {
    j["gemm_precision"] = info.gemm_precision;
    j["mfu_at_gemm_peak"] = *t.mfu_at_gemm_peak;
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices)
    devices.push_back({{"rank", d.rank},
                       {"device", d.device},
                       {"busy_ms", ns_to_ms(d.busy)},
                       {"idle_ms", ns_to_ms(r.pipeline_time - d.busy)},
                       {"peak_memory_bytes", d.peak_bytes},
                       {"peak_allocated_bytes", d.peak_allocated_bytes},
                       {"peak_reserved_bytes", d.peak_reserved_bytes},
                       {"static_bytes", d.static_bytes},
                       {"peak_activation_bytes", d.peak_activation_bytes},
                       {"capacity_bytes", d.capacity_bytes},
                       {"peak_inflight_microbatches", d.peak_inflight},
                       {"reload_wait_ms", ns_to_ms(d.reload_wait)},
                       {"peak_host_bytes", d.peak_host_bytes},
                       {"fits", d.fits}});
  if (bubbles && bubbles->ok) {
    auto parts = [](const BubbleParts& b) {
      return nlohmann::json{{"ideal", ns_to_ms(b.ideal)},
                            {"imbalance", ns_to_ms(b.imbalance)},
                            {"communication", ns_to_ms(b.communication)},
                            {"recompute", ns_to_ms(b.recompute)},
                            {"idle", ns_to_ms(b.total())}};
    };
    for (std::size_t i = 0; i < devices.size() && i < bubbles->devices.size(); ++i)
      devices[i]["bubble_ms"] = parts(bubbles->devices[i]);
    j["bubble_breakdown_ms"] = parts(bubbles->total);
  } else if (bubbles) {
    j["bubble_breakdown_error"] = bubbles->error;
  }
  j["devices"] = devices;
  if (info.offload_layers > 0) {
    const LayerOffloadPass& o = info.layer_offload;
    j["layer_offload"] = {{"layers", info.offload_layers},
                          {"of", info.offload_layers_of},
                          {"forward_wait_ms", ns_to_ms(o.forward_wait)},
                          {"backward_wait_ms", ns_to_ms(o.backward_wait)},
                          {"device_activation_bytes", o.peak_bytes},
                          {"host_bytes", o.host_bytes}};
  }
  return j;
}

std::string summary_text(const RunInfo& info, const SimResult& r, const BubbleBreakdown* bubbles) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "schedule %s   pp %d   vpp %d   micro-batches %d\n",
                info.schedule.c_str(), info.pp, info.vpp, info.microbatches);
  out += buf;
  if (info.idle_devices > 0) {
    std::snprintf(buf, sizeof buf, "devices          %d of the cluster's %d (%d idle)\n",
                  info.devices, info.devices + info.idle_devices, info.idle_devices);
    out += buf;
  }
  if (!r.ok) {
    out += "simulation failed: " + r.error + "\n";
    return out;
  }
  std::snprintf(buf, sizeof buf, "iteration time   %.3f ms   (pipeline %.3f ms)\n",
                ns_to_ms(r.iteration_time), ns_to_ms(r.pipeline_time));
  out += buf;
  std::snprintf(buf, sizeof buf, "bubble ratio     %.2f %%\n", 100.0 * r.bubble_ratio);
  out += buf;
  const Throughput t = throughput(info, r.iteration_time);
  if (t.tokens_per_s) {
    std::snprintf(buf, sizeof buf, "throughput       %.0f tokens/s\n", *t.tokens_per_s);
    out += buf;
  }
  if (t.mfu && t.mfu_at_gemm_peak) {
    // A low-precision run's MFU against its GEMMs' peak first, the bf16 figure beside it.
    std::snprintf(buf, sizeof buf,
                  "per device       %.1f TFLOP/s (with recompute)   MFU %.1f %% of the %s peak "
                  "(%.1f %% of the bf16 peak)\n",
                  *t.tflops_per_device, 100.0 * *t.mfu_at_gemm_peak, info.gemm_precision.c_str(),
                  100.0 * *t.mfu);
    out += buf;
  } else if (t.mfu) {
    std::snprintf(buf, sizeof buf, "per device       %.1f TFLOP/s (with recompute)   MFU %.1f %%\n",
                  *t.tflops_per_device, 100.0 * *t.mfu);
    out += buf;
  }
  int over = 0;
  for (const auto& d : r.devices) over += d.fits ? 0 : 1;
  if (over == 0)
    out += "memory           every device fits\n";
  else
    out += "memory           " + std::to_string(over) + " of " + std::to_string(r.devices.size()) +
           " devices DO NOT FIT\n";
  out += "\n";
  std::snprintf(buf, sizeof buf, "%4s %6s %12s %12s %12s %12s %12s %12s %8s %5s\n", "rank",
                "device", "busy ms", "idle ms", "allocated", "reserved", "peak mem", "capacity",
                "in-flt", "fits");
  out += buf;
  for (const auto& d : r.devices) {
    std::snprintf(buf, sizeof buf, "%4d %6d %12.3f %12.3f %12s %12s %12s %12s %8d %5s\n", d.rank,
                  d.device, ns_to_ms(d.busy), ns_to_ms(r.pipeline_time - d.busy),
                  format_gib(d.peak_allocated_bytes).c_str(),
                  format_gib(d.peak_reserved_bytes).c_str(), format_gib(d.peak_bytes).c_str(),
                  format_gib(d.capacity_bytes).c_str(), d.peak_inflight, d.fits ? "yes" : "NO");
    out += buf;
  }
  // Activation offload: what each device's backwards waited for their activations, and the
  // host memory they took.
  bool offloaded = false;
  for (const auto& d : r.devices) offloaded = offloaded || d.peak_host_bytes > 0;
  if (offloaded) {
    out += "\nactivation offload (host copies)\n";
    std::snprintf(buf, sizeof buf, "%4s %16s %16s\n", "rank", "reload wait ms", "host memory");
    out += buf;
    for (const auto& d : r.devices) {
      std::snprintf(buf, sizeof buf, "%4d %16.3f %16s\n", d.rank, ns_to_ms(d.reload_wait),
                    format_gib(d.peak_host_bytes).c_str());
      out += buf;
    }
  }
  if (info.offload_layers > 0) {
    // Whole-layer offload: one micro-batch's pass, the same for every micro-batch.
    const LayerOffloadPass& o = info.layer_offload;
    std::snprintf(buf, sizeof buf,
                  "\nlayer offload: %d of %d decoder layers' activations to the host, each "
                  "micro-batch\n  waited %.3f ms in forward and %.3f ms in backward for copies; "
                  "decoder activations %s on the device at most, %s on the host\n",
                  info.offload_layers, info.offload_layers_of, ns_to_ms(o.forward_wait),
                  ns_to_ms(o.backward_wait), format_gib(o.peak_bytes).c_str(),
                  format_gib(o.host_bytes).c_str());
    out += buf;
  }
  if (bubbles && bubbles->ok) {
    const BubbleBreakdown& bb = *bubbles;
    out += "\nwhere the bubble comes from (ms; ideal = balanced stages, free communication)\n";
    std::snprintf(buf, sizeof buf, "%5s %12s %12s %12s %12s %12s\n", "rank", "ideal", "imbalance",
                  "comm", "recompute", "idle");
    out += buf;
    auto row = [&](const char* rank, const BubbleParts& b) {
      std::snprintf(buf, sizeof buf, "%5s %12.3f %12.3f %12.3f %12.3f %12.3f\n", rank,
                    ns_to_ms(b.ideal), ns_to_ms(b.imbalance), ns_to_ms(b.communication),
                    ns_to_ms(b.recompute), ns_to_ms(b.total()));
      out += buf;
    };
    for (std::size_t i = 0; i < bb.devices.size(); ++i)
      row(std::to_string(i).c_str(), bb.devices[i]);
    row("total", bb.total);
  } else if (bubbles) {
    out += "\nbubble breakdown unavailable: " + bubbles->error + "\n";
  }
  return out;
}

}  // namespace bmpipe
