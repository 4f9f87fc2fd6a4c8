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
  /// `order` packs the priority above a 48-bit insertion sequence, so one integer
  /// comparison breaks ties in (priority, sequence) order and events stay small.
  struct Event {
    Time time;
    std::uint64_t order;
    Payload payload;
    std::uint32_t priority() const { return static_cast<std::uint32_t>(order >> kSequenceBits); }
  };
  static constexpr int kSequenceBits = 48;

  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }

  /// `priority` must fit in 16 bits; lower runs first among events at the same time.
  void push(Time time, std::uint32_t priority, const Payload& payload) {
    const std::uint64_t order = (static_cast<std::uint64_t>(priority) << kSequenceBits) |
                                (next_sequence_++ & ((std::uint64_t{1} << kSequenceBits) - 1));
    heap_.push_back(Event{time, order, payload});
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
      return a.order > b.order;
    }
  };
  std::vector<Event> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace bmpipe
