#pragma once
/// \file
/// One run, several observers: simulate() takes a single Observer, and a CLI that writes
/// a trace and a picture of the same run should not simulate twice.

#include <utility>
#include <vector>

#include "sim/simulate.hpp"

namespace bmpipe {

/// Forwards every call, in order, to each non-null observer given.
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
  void on_memory(int rank, Time time, std::int64_t bytes) override {
    for (Observer* o : observers_) o->on_memory(rank, time, bytes);
  }
  /// The observer to pass to simulate(): nullptr when there is none, so an untraced run
  /// stays free of observer calls.
  Observer* get() { return observers_.empty() ? nullptr : this; }

 private:
  std::vector<Observer*> observers_;
};

}  // namespace bmpipe
