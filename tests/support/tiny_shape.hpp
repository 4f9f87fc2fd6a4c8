#pragma once
/// \file
/// The tiny decoder layer the hand-worked cost tests share (recompute modules, offload
/// modules, latent MoE): small enough that every byte and FLOP is written out in the tests.

#include "sim/cost/cost_model.hpp"

namespace bmpipe::test {

/// h 8, 2 heads of 4 (q and kv columns 8 each), ffn 16, vocabulary 32, one layer;
/// `experts` > 0: that many experts of ffn 4, top-2, with a latent of `latent` columns
/// (0: none).
inline ModelShape tiny_shape(int experts, int latent = 0) {
  ModelShape m;
  m.name = "tiny";
  m.num_layers = 1;
  m.hidden_size = 8;
  m.num_attention_heads = 2;
  m.num_kv_heads = 2;
  m.ffn_hidden_size = 16;
  m.vocab_size = 32;
  if (experts > 0) {
    m.moe.num_experts = experts;
    m.moe.top_k = 2;
    m.moe.expert_ffn = 4;
    m.moe.latent_size = latent;
  }
  check_shape(m);
  return m;
}

/// 4 tokens (seq 4, micro-batch 1), Megatron-Core's fused kernels, bf16, gradients
/// overwritten (no accumulation), ep as given.
inline CostSettings tiny_settings(int ep = 1) {
  CostSettings st;
  st.kernels = Kernels::fused;
  st.seq_length = 4;
  st.micro_batch_size = 1;
  st.ep = ep;
  st.grad_accumulation = GradAccumulation::overwrite;
  return st;
}

}  // namespace bmpipe::test
