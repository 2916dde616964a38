#pragma once
// defines: tagc::local_cluster — an in-process job of `nodes x ranks_per_node` threads
//          with the flat world and the two levels (comm/two_level.hpp), for tests and
//          examples that hold a two-level reduction to the flat one.
//
//   local_cluster cluster(/*nodes=*/2, /*ranks_per_node=*/4);
//   cluster.run([&](int rank, two_level_communicator<local_communicator>& levels,
//                   local_communicator& flat) { ... });

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "local.hpp"
#include "two_level.hpp"

TAGC_BEGIN_NAMESPACE

class local_cluster {
 public:
  local_cluster(int nodes, int ranks_per_node, std::chrono::milliseconds timeout = std::chrono::seconds(120))
      : shape_{nodes, ranks_per_node}, flat_(nodes * ranks_per_node, timeout) {
    for (int m = 0; m < nodes; ++m) node_worlds_.push_back(std::make_unique<local_world>(ranks_per_node, timeout));
    for (int l = 0; l < ranks_per_node; ++l) cross_worlds_.push_back(std::make_unique<local_world>(nodes, timeout));
  }

  node_shape shape() const { return shape_; }
  int size() const { return shape_.world(); }

  // Rank r's two levels: node r / K (local rank r % K) and the cross world of local rank r % K.
  two_level_communicator<local_communicator> levels(int rank) {
    const int m = shape_.node_of(rank), l = shape_.local_rank_of(rank);
    return {node_worlds_[std::size_t(m)]->communicator(l), cross_worlds_[std::size_t(l)]->communicator(m)};
  }
  local_communicator flat(int rank) { return flat_.communicator(rank); }

  // Fail every pending collective on every level (a rank's thread died).
  void abort(const std::string& why) {
    flat_.abort(why);
    for (auto& w : node_worlds_) w->abort(why);
    for (auto& w : cross_worlds_) w->abort(why);
  }

  // fn(rank, levels, flat) on size() threads, joined.
  template <class Fn>
  void run(Fn&& fn) {
    std::vector<std::thread> threads;
    threads.reserve(std::size_t(size()));
    for (int r = 0; r < size(); ++r)
      threads.emplace_back([this, r, &fn] {
        auto lv = levels(r);
        auto fl = flat(r);
        fn(r, lv, fl);
      });
    for (auto& t : threads) t.join();
  }

 private:
  node_shape shape_;
  local_world flat_;
  std::vector<std::unique_ptr<local_world>> node_worlds_, cross_worlds_;
};

TAGC_END_NAMESPACE
