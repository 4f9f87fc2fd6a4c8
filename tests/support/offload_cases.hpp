#pragma once
/// \file
/// The job the offload-mode tests work their bytes and copy times out by hand on
/// (tests/experiment/offload_mode_test.cpp, selective_offload_test.cpp).

#include <string>

#include "support/support.hpp"

namespace bmpipe::test {

/// Llama-2-7B at tp 2 on 32 devices (4 nodes of 8), pp 16: two decoder layers a stage,
/// 4 micro-batches of 1 x 1024 tokens, 1F1B, offload_lead 1, recompute_modules left at
/// their default (core_attn). `device` is cluster.device's value (line 4), `modules`
/// training.offload_modules' (line 14) and `recompute` training.recompute's (line 15).
inline std::string offload_job(const std::string& device, const std::string& modules,
                               const std::string& recompute) {
  return "cluster:\n"               // 1
         "  nodes: 4\n"             // 2
         "  devices_per_node: 8\n"  // 3
         "  device: " +
         device + "\n" +                 // 4
         "model: {preset: llama2-7b}\n"  // 5
         "training:\n"                   // 6
         "  schedule: 1f1b\n"            // 7
         "  pp: 16\n"                    // 8
         "  tp: 2\n"                     // 9
         "  seq_length: 1024\n"          // 10
         "  micro_batch_size: 1\n"       // 11
         "  microbatches: 4\n"           // 12
         "  offload_lead: 1\n"           // 13
         "  offload_modules: " +
         modules + "\n" +                     // 14
         "  recompute: " + recompute + "\n";  // 15
}

/// `bmpipe simulate` of `text` (an offload_job whose line 15, training.recompute, is wrong)
/// exits 2 naming the file, line 15 and `key`, and saying `says`.
inline void expect_offload_job_refused(const ScratchDir& dir, const std::string& text,
                                       const std::string& key, const std::string& says) {
  const std::string path = write_file(dir.file("bad.yaml"), text);
  const CliRun r = run_cli("simulate " + path);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(path + ":15: " + key + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

}  // namespace bmpipe::test
