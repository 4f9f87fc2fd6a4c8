#pragma once
/// \file
/// What simulate() tells the outputs while it runs, and a tee to tell several of them.
///
/// Observer is an interface whose methods are all pure virtual (taskflow's
/// ObserverInterface is the model): an event added here is a compile error in every adapter
/// until the adapter says what it does with it, so no output can silently miss one. The
/// records themselves are defined in sim/simulate.hpp.

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe {

struct OpRecord;
struct TransferRecord;
struct ReductionRecord;
struct CopyRecord;
struct SimResult;

/// Receives the run as it happens, in event order. The engine calls it only when one is
/// given, so tracing costs nothing otherwise; giving one selects the ordered engine.
class Observer {
 public:
  virtual ~Observer() = default;
  /// An op has finished (called at its end time).
  virtual void on_op(const OpRecord& record) = 0;
  /// A transfer has been placed on its links (called at its request time).
  virtual void on_transfer(const TransferRecord& record) = 0;
  /// A copy of offloaded activations has been placed on its copy stream (called when it is
  /// issued; StageCost::offload_bytes).
  virtual void on_copy(const CopyRecord& record) = 0;
  /// Rank `rank`'s live activation bytes changed to `activation_bytes` at `time`.
  virtual void on_memory(int rank, Time time, std::int64_t activation_bytes) = 0;
  /// A gradient reduction (SimInput::grad_buckets, tied_reduce). These come after every op
  /// and transfer, once the run is over: rank by rank, each rank's in the order they ran,
  /// then the tied-embedding all-reduce once for each of its two ranks.
  virtual void on_reduction(const ReductionRecord& record) = 0;
  /// The run is over: the result simulate() is about to return (DeviceResult::tail_start
  /// says where each rank's tail work starts). Called last, once per simulate() call, also
  /// when the run failed.
  virtual void on_result(const SimResult& result) = 0;
};

/// Listens to nothing; passing one to simulate() only selects the ordered engine.
class NullObserver final : public Observer {
 public:
  void on_op(const OpRecord&) override {}
  void on_transfer(const TransferRecord&) override {}
  void on_copy(const CopyRecord&) override {}
  void on_memory(int, Time, std::int64_t) override {}
  void on_reduction(const ReductionRecord&) override {}
  void on_result(const SimResult&) override {}
};

/// One run, several observers: simulate() takes a single Observer, and a CLI that writes a
/// trace and a picture of the same run should not simulate twice. Forwards every call, in
/// order, to each non-null observer given.
class TeeObserver final : public Observer {
 public:
  explicit TeeObserver(std::vector<Observer*> observers) : observers_(std::move(observers)) {
    std::erase(observers_, nullptr);
  }
  void on_op(const OpRecord& r) override {
    for (Observer* o : observers_) o->on_op(r);
  }
  void on_transfer(const TransferRecord& t) override {
    for (Observer* o : observers_) o->on_transfer(t);
  }
  void on_copy(const CopyRecord& c) override {
    for (Observer* o : observers_) o->on_copy(c);
  }
  void on_memory(int rank, Time time, std::int64_t bytes) override {
    for (Observer* o : observers_) o->on_memory(rank, time, bytes);
  }
  void on_reduction(const ReductionRecord& r) override {
    for (Observer* o : observers_) o->on_reduction(r);
  }
  void on_result(const SimResult& r) override {
    for (Observer* o : observers_) o->on_result(r);
  }
  /// The observer to pass to simulate(): nullptr when there is none, so an untraced run
  /// stays free of observer calls.
  Observer* get() { return observers_.empty() ? nullptr : this; }

 private:
  std::vector<Observer*> observers_;
};

}  // namespace bmpipe
