# torchtitan's 2026 launch (pytorch/torchtitan at b5bcd76c66d0): the config registry's
# deepseek_v3_16b (Interleaved1F1B, expert parallelism 8, CUDA graphs off) on 2 pipeline
# ranks, 8 micro-batches of 4 sequences each.
torchrun --nproc_per_node=8 --rdzv_backend c10d --rdzv_endpoint="localhost:0" \
  -m torchtitan.train --module deepseek_v3 --config deepseek_v3_16b \
  --parallelism.pipeline_parallel_degree 2 \
  --parallelism.num_pp_microbatches 8 \
  --compile.components model,loss 2>&1 | tee train.log
