# A small MoE job: 4 experts, top-2, ep 2, cp 2 (ring), FP8 hybrid tensorwise, pp 2.
torchrun --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 4 --hidden-size 256 --num-attention-heads 4 \
  --group-query-attention --num-query-groups 2 \
  --ffn-hidden-size 512 --seq-length 512 --swiglu --untie-embeddings-and-output-weights \
  --vocab-size 1024 --attention-dropout 0 --hidden-dropout 0 --use-flash-attn \
  --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 256 --moe-shared-expert-intermediate-size 256 \
  --moe-token-dispatcher-type alltoall --moe-grouped-gemm --moe-layer-freq 1 \
  --expert-model-parallel-size 2 --context-parallel-size 2 --cp-comm-type p2p \
  --pipeline-model-parallel-size 2 \
  --fp8-format hybrid --fp8-recipe tensorwise \
  --micro-batch-size 1 --global-batch-size 8 \
  --bf16 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
