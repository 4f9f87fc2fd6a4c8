// The host link as a device property (issue 43, item 1): each preset's host link, host memory
// and CPU Adam throughput pinned to the figure its comment in sim/cost/hardware.cpp cites, and
// the cluster.device keys that override them.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "sim/cost/hardware.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace host_link_test {

const std::string kData = BMPIPE_TEST_DATA_DIR;

const HardwareSpec& preset(const char* name) {
  const HardwareSpec* h = find_hardware_preset(name);
  if (!h) throw std::runtime_error(std::string("no preset ") + name);
  return *h;
}

struct HostRow {
  const char* preset;
  const char* link;
  double link_GBps;  ///< one way
  int link_devices;
  double memory_GiB;
  int host_devices;
};

// The datasheet / system-description numbers (hardware.cpp cites each):
//   PCIe 5.0 x16: "PCIe Gen5: 128 GB/s" both ways = 64 one way; PCIe 4.0 x16: 32.
//   HGX H100 / H200 / B200 hosts: 32 x 64 GB DIMMs = 2048 GiB for 8 GPUs; A100 (Inspur
//   NF5488A5): 16 x 64 GB = 1024 GiB for 8.
//   GB200 / GB300: NVLink-C2C 900 GB/s both ways = 450 one way per Grace, shared by its 2
//   GPUs; 480 GB LPDDR5X = 447 GiB per Grace (480e9 / 2^30 = 447.03).
//   Ascend 910C (Zuo et al., "Serving Large Language Models on Huawei CloudMatrix384",
//   arXiv 2506.12708, sec. 3, the 910C node): 4 Kunpeng sockets of about 160 GB/s of UB
//   one way each for 8 NPUs: 160 shared by 2, the node's 8 NPUs one host; no host DRAM
//   figure (0: offload needs cluster.device.host_memory_GiB).
//   Ascend 910B, B300: no figure found, so none (offloading refused).
const HostRow kRows[] = {
    {"h100-sxm", "pcie5_x16", 64, 1, 2048, 8}, {"h200", "pcie5_x16", 64, 1, 2048, 8},
    {"h800", "pcie5_x16", 64, 1, 2048, 8},     {"b200", "pcie5_x16", 64, 1, 2048, 8},
    {"a100-80g", "pcie4_x16", 32, 1, 1024, 8}, {"gb200", "nvlink_c2c", 450, 2, 447, 2},
    {"gb300", "nvlink_c2c", 450, 2, 447, 2},   {"b300", "", 0, 1, 0, 1},
    {"ascend-910b", "", 0, 1, 0, 1},           {"ascend-910c", "ub", 160, 2, 0, 8},
};

TEST(HostLink, EveryPresetPinnedToItsSource) {
  for (const HostRow& r : kRows) {
    SCOPED_TRACE(r.preset);
    const HardwareSpec& h = preset(r.preset);
    EXPECT_EQ(h.host_link, r.link);
    EXPECT_DOUBLE_EQ(h.host_link_GBps, r.link_GBps);
    EXPECT_EQ(h.host_link_devices, r.link_devices);
    EXPECT_DOUBLE_EQ(h.host_memory_GiB, r.memory_GiB);
    EXPECT_EQ(h.host_devices, r.host_devices);
  }
  // Every preset is in the table.
  const std::string names = hardware_preset_names();
  EXPECT_EQ(std::size(kRows),
            static_cast<std::size_t>(std::count(names.begin(), names.end(), ',') + 1));
}

TEST(HostLink, CpuAdamIsZeroOffloadsPerHostFigure) {
  // ZeRO-Offload: 10e9 parameters in 2.57 s on one (Xeon) host = 3.891e9 parameters/s, for
  // the x86 and Grace hosts; none for a Kunpeng host (ascend-910c) nor where no link is known.
  for (const HostRow& r : kRows) {
    SCOPED_TRACE(r.preset);
    const double expected = r.link_GBps > 0 && r.memory_GiB > 0 ? 10.0 / 2.57 : 0.0;
    EXPECT_NEAR(preset(r.preset).host_adam_Gparams_per_s, expected, 1e-12);
  }
  EXPECT_NEAR(preset("h200").host_adam_Gparams_per_s, 3.891, 0.001);
}

std::string yaml(const std::string& device) {
  return "cluster:\n  nodes: 1\n  devices_per_node: 8\n  device: " + device +
         "\nmodel: {preset: llama2-7b, num_layers: 4}\n"
         "training:\n  schedule: 1f1b\n  pp: 2\n  seq_length: 1024\n  micro_batch_size: 1\n"
         "  microbatches: 4\n";
}

ConfigError error_of(const std::string& text) {
  return test::config_error(text, {}, kData + "/inline.yaml");
}

TEST(HostLink, DeviceKeysOverrideThePreset) {
  const Config c = parse_config(
      yaml("{preset: h200, host_link: nvlink_c2c, host_link_GBps: 450, host_link_devices: 2,\n"
           "           host_memory_GiB: 447, host_devices: 2, host_adam_Gparams_per_s: 7.5}"),
      "a.yaml");
  ASSERT_TRUE(c.device.hardware);
  const HardwareSpec& h = *c.device.hardware;
  EXPECT_EQ(h.host_link, "nvlink_c2c");
  EXPECT_DOUBLE_EQ(h.host_link_GBps, 450);
  EXPECT_EQ(h.host_link_devices, 2);
  EXPECT_DOUBLE_EQ(h.host_memory_GiB, 447);
  EXPECT_EQ(h.host_devices, 2);
  EXPECT_DOUBLE_EQ(h.host_adam_Gparams_per_s, 7.5);
  // A key not given keeps the preset's value.
  const Config d = parse_config(yaml("{preset: gb200, host_link_GBps: 100}"), "a.yaml");
  EXPECT_DOUBLE_EQ(d.device.hardware->host_link_GBps, 100);
  EXPECT_DOUBLE_EQ(d.device.hardware->host_memory_GiB, 447);
}

TEST(HostLink, BadValuesNameTheirKeyAndLine) {
  const ConfigError kind = error_of(yaml("{preset: h200,\n    host_link: pcie7_x2}"));
  EXPECT_EQ(kind.key(), "cluster.device.host_link");
  EXPECT_EQ(kind.line(), 5);
  const ConfigError negative = error_of(yaml("{preset: h200, host_link_GBps: -1}"));
  EXPECT_EQ(negative.key(), "cluster.device.host_link_GBps");
  EXPECT_EQ(negative.line(), 4);
  const ConfigError sharing = error_of(yaml("{preset: h200, host_devices: 0}"));
  EXPECT_EQ(sharing.key(), "cluster.device.host_devices");
  const ConfigError text = error_of(yaml("{preset: h200, host_memory_GiB: lots}"));
  EXPECT_EQ(text.key(), "cluster.device.host_memory_GiB");
}

}  // namespace host_link_test
}  // namespace bmpipe
