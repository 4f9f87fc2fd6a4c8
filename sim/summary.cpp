#include "sim/summary.hpp"

#include <cstdio>

namespace bmpipe {

std::string format_gib(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  return buf;
}

nlohmann::json summary_json(const RunInfo& info, const SimResult& r) {
  nlohmann::json j;
  j["schedule"] = info.schedule;
  j["pp"] = info.pp;
  j["vpp"] = info.vpp;
  j["microbatches"] = info.microbatches;
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
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices)
    devices.push_back({{"rank", d.rank},
                       {"device", d.device},
                       {"busy_ms", ns_to_ms(d.busy)},
                       {"idle_ms", ns_to_ms(r.pipeline_time - d.busy)},
                       {"peak_memory_bytes", d.peak_bytes},
                       {"static_bytes", d.static_bytes},
                       {"peak_activation_bytes", d.peak_activation_bytes},
                       {"capacity_bytes", d.capacity_bytes},
                       {"peak_inflight_microbatches", d.peak_inflight},
                       {"fits", d.fits}});
  j["devices"] = devices;
  return j;
}

std::string summary_text(const RunInfo& info, const SimResult& r) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "schedule %s   pp %d   vpp %d   micro-batches %d\n",
                info.schedule.c_str(), info.pp, info.vpp, info.microbatches);
  out += buf;
  if (!r.ok) {
    out += "simulation failed: " + r.error + "\n";
    return out;
  }
  std::snprintf(buf, sizeof buf, "iteration time   %.3f ms   (pipeline %.3f ms)\n",
                ns_to_ms(r.iteration_time), ns_to_ms(r.pipeline_time));
  out += buf;
  std::snprintf(buf, sizeof buf, "bubble ratio     %.2f %%\n", 100.0 * r.bubble_ratio);
  out += buf;
  int over = 0;
  for (const auto& d : r.devices) over += d.fits ? 0 : 1;
  if (over == 0)
    out += "memory           every device fits\n";
  else
    out += "memory           " + std::to_string(over) + " of " + std::to_string(r.devices.size()) +
           " devices DO NOT FIT\n";
  out += "\n";
  std::snprintf(buf, sizeof buf, "%4s %6s %12s %12s %12s %12s %8s %5s\n", "rank", "device",
                "busy ms", "idle ms", "peak mem", "capacity", "in-flt", "fits");
  out += buf;
  for (const auto& d : r.devices) {
    std::snprintf(buf, sizeof buf, "%4d %6d %12.3f %12.3f %12s %12s %8d %5s\n", d.rank, d.device,
                  ns_to_ms(d.busy), ns_to_ms(r.pipeline_time - d.busy),
                  format_gib(d.peak_bytes).c_str(), format_gib(d.capacity_bytes).c_str(),
                  d.peak_inflight, d.fits ? "yes" : "NO");
    out += buf;
  }
  return out;
}

}  // namespace bmpipe
