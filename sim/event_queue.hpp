#pragma once
/// \file
/// A binary-heap event queue keyed on (time, priority, sequence). The sequence number is
/// the insertion order, so two events at the same time and priority always come out in the
/// order they went in: the run is deterministic without depending on addresses or on the
/// heap's internal layout (the lesson of SST-core's Activity ordering).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe {

template <typename Payload>
class EventQueue {
 public:
  struct Event {
    Time time;
    std::uint32_t priority;
    std::uint64_t sequence;
    Payload payload;
  };

  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }

  void push(Time time, std::uint32_t priority, const Payload& payload) {
    heap_.push_back(Event{time, priority, next_sequence_++, payload});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  /// Removes and returns the earliest event. Precondition: !empty().
  Event pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    Event e = heap_.back();
    heap_.pop_back();
    return e;
  }

 private:
  // std heap functions build a max-heap; "greater" ordering makes the top the earliest.
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      if (a.priority != b.priority) return a.priority > b.priority;
      return a.sequence > b.sequence;
    }
  };
  std::vector<Event> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace bmpipe
