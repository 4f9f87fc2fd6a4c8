"""simulate() and plan() let go of the GIL while C++ runs, so other Python threads go on.

How this is shown without timing races: a worker thread makes one long call while the
main thread keeps stamping the time, sleeping 1 ms between stamps. A stamp needs the GIL.
If the call held the GIL from entry to exit, no stamp could fall inside it: the worker
takes the GIL back within CPython's switch interval (5 ms) of any hand-over, and between
its own stamps of the call's start and end it runs for microseconds outside C++. So the
test counts the stamps that fall in the middle half of the call, at least 25% of a call
of at least 0.3 s (75 ms) away from either end: held, that count is 0 whatever the load;
released, it is around a hundred, and one is enough to pass. On a loaded machine the
main thread still only has to be scheduled once in 150 ms. The problem is doubled until
a call lasts that long, so a faster machine or build cannot make it too short to tell.
(Comparing wall times of 2 threads against 1 would depend on free cores; this does
not.)"""
import threading
import time

import pytest

import bmpipe
from conftest import TINY, example


def stamps_during(call):
    """Runs call() on a worker thread; returns its (start, end) and the main thread's
    time stamps meanwhile."""
    span = {}

    def worker():
        span["start"] = time.perf_counter()
        span["result"] = call()
        span["end"] = time.perf_counter()

    t = threading.Thread(target=worker)
    stamps = []
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    assert "end" in span, "the call raised"
    return span["start"], span["end"], stamps


def assert_runs_without_the_gil(call, size):
    """call(size) on a worker thread, the size doubled until one call lasts 0.3 s (so the
    test fits a Release build and a sanitizer build alike)."""
    for _ in range(12):
        start, end, stamps = stamps_during(lambda: call(size))
        length = end - start
        if length >= 0.3:
            break
        size *= 2
    else:
        pytest.fail(f"the call still took only {length:.3f} s at size {size // 2}")
    inner = [s for s in stamps if start + 0.25 * length <= s <= end - 0.25 * length]
    assert inner, (f"no Python thread ran during the middle half of a {length:.3f} s call "
                   f"({len(stamps)} stamps in all): the GIL was held")


def test_simulate_releases_the_gil():
    # m micro-batches of 1F1B on 4 stages: 8m ops; a Release build reaches 0.3 s near m = 10^5.
    assert_runs_without_the_gil(lambda m: bmpipe.simulate(str(TINY), microbatches=m), 10_000)


def test_plan_releases_the_gil():
    config = bmpipe.load(example("gpt3_175b_a100.yaml"))
    assert_runs_without_the_gil(lambda n: bmpipe.plan(config, threads=1, max_evals=n), 100)


def test_threads_get_the_answers_they_would_get_alone():
    # The same config from several threads at once: nothing is shared between calls.
    config = bmpipe.load(example("h200_llama2_7b.yaml"))
    names = ["1f1b", "zb-h1", "zb-v", "interleaved"]
    alone = {n: bmpipe.simulate(config, n) for n in names}
    together = {}

    def run(n):
        together[n] = bmpipe.simulate(config, n)

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone
