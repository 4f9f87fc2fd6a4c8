# torchtitan's 2026 launch (pytorch/torchtitan at b5bcd76c66d0, run_train.sh): the
# config registry's llama3_70b, with tensor parallelism 4 instead of its 8.
NGPU=64 MODULE=llama3 CONFIG=llama3_70b ./run_train.sh \
  --parallelism.tensor_parallel_degree 4 \
  --training.steps 100
