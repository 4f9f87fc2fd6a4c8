# A small interleaved job (2 virtual stages per rank) with full block recompute, FP16.
python pretrain_gpt.py --num-layers 8 --hidden-size 256 --num-attention-heads 4 \
  --seq-length 256 --vocab-size 1024 --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 2 \
  --recompute-granularity full --recompute-method block --recompute-num-layers 1 \
  --micro-batch-size 1 --global-batch-size 4 --fp16 --accumulate-allreduce-grads-in-fp32
