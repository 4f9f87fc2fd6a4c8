#include "sim/fb_pair.hpp"

#include <algorithm>

namespace bmpipe {
namespace {

struct Piece {
  Time duration = 0;
  bool comm = false;
};

// Computation and a2a in turn, starting with computation (possibly of 0 ns); a zero a2a
// joins its neighbours.
std::vector<Piece> merge(std::span<const Time> parts) {
  std::vector<Piece> out;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const bool comm = k % 2 == 1;
    if (comm && parts[k] == 0) continue;
    if (!out.empty() && out.back().comm == comm)
      out.back().duration += parts[k];  // two computations around a zero a2a
    else
      out.push_back(Piece{parts[k], comm});
  }
  return out;
}

}  // namespace

std::vector<FbPiece> fb_pair_timeline(std::span<const Time> forward,
                                      std::span<const Time> backward) {
  const std::vector<Piece> chain[2] = {merge(forward), merge(backward)};
  std::vector<FbPiece> out;
  out.reserve(chain[0].size() + chain[1].size());
  std::size_t next[2] = {0, 0};
  Time ready[2] = {0, 0};  // end of the chain's previous piece
  Time free[2] = {0, 0};   // per stream: 0 computation, 1 a2a
  int last[2] = {0, 0};    // per stream: the chain that ran its last piece (0: F)
  while (next[0] < chain[0].size() || next[1] < chain[1].size()) {
    int pick = -1;
    Time pick_start = 0;
    for (int c : {1, 0}) {  // backward first: it wins ties unless the rule below says not
      if (next[c] >= chain[c].size()) continue;
      const Piece& p = chain[c][next[c]];
      const Time start = std::max(ready[c], free[p.comm ? 1 : 0]);
      if (pick < 0 || start < pick_start) {
        pick = c, pick_start = start;
        continue;
      }
      if (start > pick_start) continue;
      const Piece& q = chain[pick][next[pick]];
      if (p.comm != q.comm) {
        if (!p.comm) pick = c;  // across streams: computation first
      } else if (last[p.comm ? 1 : 0] == pick) {
        pick = c;  // one stream: the chain that did not run its last piece
      }
    }
    const Piece& p = chain[pick][next[pick]];
    const int stream = p.comm ? 1 : 0;
    const Time end = pick_start + p.duration;
    out.push_back(FbPiece{pick == 1, p.comm, static_cast<int>(next[pick]), pick_start, end});
    ready[pick] = end;
    free[stream] = end;
    last[stream] = pick;
    ++next[pick];
  }
  return out;
}

Time fb_pair_time(std::span<const Time> forward, std::span<const Time> backward) {
  Time end = 0;
  for (const FbPiece& p : fb_pair_timeline(forward, backward)) end = std::max(end, p.end);
  return end;
}

std::vector<FbPiece> fb_chain_timeline(std::span<const Time> parts, bool backward) {
  std::vector<FbPiece> out;
  Time t = 0;
  int index = 0;
  for (const Piece& p : merge(parts)) {
    out.push_back(FbPiece{backward, p.comm, index++, t, t + p.duration});
    t += p.duration;
  }
  return out;
}

}  // namespace bmpipe
