# A small dense job under Megatron-FSDP, selective recompute of named modules, tp 2.
python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 \
  --ffn-hidden-size 512 --seq-length 256 --vocab-size 1024 \
  --tensor-model-parallel-size 2 --sequence-parallel \
  --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params \
  --recompute-granularity selective --recompute-modules core_attn mlp \
  --micro-batch-size 1 --global-batch-size 4 --bf16 --grad-reduce-in-bf16
