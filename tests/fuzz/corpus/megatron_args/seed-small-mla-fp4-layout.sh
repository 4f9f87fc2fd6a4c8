# A small MLA + MoE job with an MTP layer, a Megatron layout over 2 stages and NVFP4.
python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 \
  --ffn-hidden-size 512 --seq-length 256 --vocab-size 1024 --swiglu \
  --multi-latent-attention --q-lora-rank 64 --kv-lora-rank 32 --qk-head-dim 32 \
  --qk-pos-emb-head-dim 16 --v-head-dim 32 \
  --num-experts 8 --moe-router-topk 2 --moe-router-num-groups 4 --moe-router-group-topk 2 \
  --moe-ffn-hidden-size 128 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep \
  --expert-model-parallel-size 4 --mtp-num-layers 1 --pipeline-model-parallel-size 2 \
  --pipeline-model-parallel-layout "Ett|ttmL" \
  --fp4-format e2m1 --fp4-recipe nvfp4 \
  --micro-batch-size 1 --global-batch-size 8 --bf16
