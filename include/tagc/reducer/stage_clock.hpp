#pragma once
// defines: tagc::stage_clock — a reducer call's profiling (set_profiling(true)): at
//          each stage boundary it synchronises the execution space and charges the
//          time since the previous boundary to that stage's slot of
//          reduce_stats::stage_seconds. Off, a boundary costs a branch: the
//          synchronisation would cost a GPU its overlap.

#include <chrono>

#include "../core/config.hpp"
#include "../stats.hpp"

TAGC_BEGIN_NAMESPACE

template <class Exec>
struct stage_clock {
  Exec& exec;
  bool on;
  reduce_stats::stage_seconds& seconds;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();

  void mark(double reduce_stats::stage_seconds::*slot) {
    if (!on) return;
    (void)exec.synchronize();
    const auto now = std::chrono::steady_clock::now();
    seconds.*slot += std::chrono::duration<double>(now - last).count();
    last = now;
  }
};

TAGC_END_NAMESPACE
