// Trace and picture writing at scale: p = 64, m = 1024 (131072 ops, 129024 transfers).
// bytes_per_second is the trace's size over the time of simulate() + writing it.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <streambuf>

#include "schedules/registry.hpp"
#include "sim/bubbles.hpp"
#include "sim/simulate.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/svg.hpp"

namespace {

using namespace bmpipe;

// Counts what it is given and keeps nothing: the writer's own cost, without the disk.
class NullBuf : public std::streambuf {
 public:
  std::int64_t bytes = 0;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) ++bytes;
    return c;
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += n;
    return n;
  }
};

struct Fixture {
  Schedule sch;
  std::unique_ptr<Topology> topo;
  SimInput in;
  Fixture(int p, int m) {
    ScheduleParams params;
    params.pp = p;
    params.microbatches = m;
    sch = make_1f1b(params);
    ClusterSpec spec;
    spec.nodes = 1;
    spec.devices_per_node = p;
    spec.intra_node = LinkSpec{450, 5};
    topo = std::make_unique<Topology>(spec);
    StageCost c;
    c.forward = 1'000'000;
    c.backward_input = 1'000'000;
    c.backward_weight = 1'000'000;
    c.activation_bytes = 1 << 20;
    c.output_bytes = 1 << 20;
    in.topology = topo.get();
    in.stages.assign(sch.num_stages, c);
    for (int r = 0; r < p; ++r) in.rank_device.push_back(r);
    in.static_bytes.assign(p, 1LL << 30);
    in.capacity_bytes.assign(p, 80LL << 30);
  }
};

void BM_TraceWrite_NullStream(benchmark::State& state) {
  const Fixture fx(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  std::int64_t bytes = 0;
  for (auto _ : state) {
    NullBuf sink;
    std::ostream out(&sink);
    const SimResult r = simulate_with_trace(fx.in, fx.sch, out);
    if (!r.ok) state.SkipWithError(r.error.c_str());
    bytes += sink.bytes;
  }
  state.SetBytesProcessed(bytes);
  state.counters["trace_MB"] = static_cast<double>(bytes) / state.iterations() / 1e6;
}

void BM_TraceWrite_TempFile(benchmark::State& state) {
  const Fixture fx(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const auto path = std::filesystem::temp_directory_path() / "bmpipe_bench_trace.json";
  std::int64_t bytes = 0;
  for (auto _ : state) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      const SimResult r = simulate_with_trace(fx.in, fx.sch, out);
      if (!r.ok) state.SkipWithError(r.error.c_str());
    }
    bytes += static_cast<std::int64_t>(std::filesystem::file_size(path));
  }
  std::filesystem::remove(path);
  state.SetBytesProcessed(bytes);
}

void BM_TimelineSvg_NullStream(benchmark::State& state) {
  const Fixture fx(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  std::int64_t bytes = 0;
  for (auto _ : state) {
    NullBuf sink;
    std::ostream out(&sink);
    write_timeline_svg(out, record_timeline(fx.in, fx.sch));
    bytes += sink.bytes;
  }
  state.SetBytesProcessed(bytes);
}

void BM_BubbleBreakdown(benchmark::State& state) {
  const Fixture fx(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const SimResult measured = simulate(fx.in, fx.sch);
  for (auto _ : state) {
    const BubbleBreakdown b = decompose_bubbles(fx.in, fx.sch, measured);
    benchmark::DoNotOptimize(b.total.ideal);
  }
}

BENCHMARK(BM_TraceWrite_NullStream)->Args({8, 64})->Args({64, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceWrite_TempFile)->Args({64, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TimelineSvg_NullStream)->Args({64, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BubbleBreakdown)->Args({64, 1024})->Unit(benchmark::kMillisecond);

}  // namespace
