// test_text_loader.cpp: gpt2::DataLoader: shifted targets, disjoint rank slices that
// cover the global batch, deterministic wrap-around, exact save/restore of positions, in
// the sequential and the shuffled order.
#include <doctest/doctest.h>

#include "text_test_support.hpp"

#include "text/data_loader.hpp"
#include "text/text_error.hpp"
#include "text/token_shard.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

using text_test::scratch_dir;

namespace {

// A shard whose token at position i is base + i, so every token says where it came from.
std::vector<uint32_t> make_shard(const fs::path& path, uint32_t base, uint32_t count) {
  std::vector<uint32_t> t(count);
  for (uint32_t i = 0; i < count; ++i) t[i] = base + i;
  gpt2::write_shard(path, t);
  return t;
}

struct Batch {
  std::vector<int32_t> x, y;
  friend bool operator==(const Batch&, const Batch&) = default;
};

Batch next(gpt2::DataLoader& dl) {
  Batch b{std::vector<int32_t>(dl.batch_size() * dl.seq_len()),
          std::vector<int32_t>(dl.batch_size() * dl.seq_len())};
  dl.next_batch(b.x, b.y);
  return b;
}

// The position after `skip` batches, and the `n` batches that follow it: what a resumed
// loader must reproduce.
std::pair<gpt2::LoaderPosition, std::vector<Batch>> position_and_batches_after(gpt2::DataLoader& dl, uint64_t skip,
                                                                               uint64_t n) {
  for (uint64_t k = 0; k < skip; ++k) (void)next(dl);
  const gpt2::LoaderPosition at = dl.position();
  std::vector<Batch> batches;
  for (uint64_t k = 0; k < n; ++k) batches.push_back(next(dl));
  return {at, batches};
}

}  // namespace

TEST_CASE("gpt2_text loader: targets are inputs shifted by one; shards wrap deterministically") {
  const fs::path dir = scratch_dir("loader_basic");
  // B=2, T=8, world=1: global batch 16 tokens. Shard 0 (100 tokens): (100-1)/16 = 6
  // batches; shard 1 (40 tokens): 2 batches.
  make_shard(dir / "c_train_000.bin", 1000, 100);
  make_shard(dir / "c_train_001.bin", 5000, 40);
  gpt2::DataLoader dl(gpt2::list_shards(dir, "train"), 2, 8, 0, 1);
  REQUIRE(dl.shards().size() == 2);
  CHECK(dl.total_batches() == 8);

  std::vector<Batch> epoch;
  for (uint64_t k = 0; k < dl.total_batches(); ++k) epoch.push_back(next(dl));
  for (size_t k = 0; k < epoch.size(); ++k) {
    const int32_t start = k < 6 ? 1000 + 16 * int32_t(k) : 5000 + 16 * int32_t(k - 6);
    for (int i = 0; i < 16; ++i) {
      CHECK(epoch[k].x[i] == start + i);
      CHECK(epoch[k].y[i] == start + i + 1);
    }
  }
  // After one pass it starts over, identically.
  CHECK(dl.position() == gpt2::LoaderPosition{0, 0, 8});
  for (const Batch& b : epoch) CHECK(next(dl) == b);
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text loader: rank slices are disjoint and cover the global batch") {
  const fs::path dir = scratch_dir("loader_ranks");
  const auto stream = make_shard(dir / "d_train.bin", 0, 1000);
  const int world = 4;
  const size_t B = 3, T = 5, bt = B * T, global = world * bt;
  std::vector<gpt2::DataLoader> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(std::vector{dir / "d_train.bin"}, B, T, r, world);
  CHECK(ranks[0].total_batches() == (1000 - 1) / global);
  for (uint64_t k = 0; k < ranks[0].total_batches() + 2; ++k) {
    const uint64_t start = (k % ranks[0].total_batches()) * global;
    std::vector<int32_t> all_x, all_y;
    for (auto& dl : ranks) {
      const Batch b = next(dl);
      all_x.insert(all_x.end(), b.x.begin(), b.x.end());
      all_y.insert(all_y.end(), b.y.begin(), b.y.end());
    }
    // Rank r's slice is exactly [start + r*B*T, start + (r+1)*B*T): concatenated in
    // rank order they are the global batch, each token once.
    REQUIRE(all_x.size() == global);
    for (size_t i = 0; i < global; ++i) {
      CHECK(all_x[i] == int32_t(stream[start + i]));
      CHECK(all_y[i] == int32_t(stream[start + i + 1]));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text loader: a saved position restores the exact next batches, in either order") {
  const fs::path dir = scratch_dir("loader_resume");
  make_shard(dir / "e_train_0.bin", 0, 300);
  make_shard(dir / "e_train_1.bin", 10000, 250);
  const auto shards = gpt2::list_shards(dir, "train");
  for (int rank = 0; rank < 2; ++rank) {
    gpt2::DataLoader a(shards, 2, 16, rank, 2);
    const auto [saved, expected] = position_and_batches_after(a, 6, 10);  // into shard 1, then wrapping
    CHECK(saved.shard == 1);

    gpt2::DataLoader b(shards, 2, 16, rank, 2);
    b.seek(saved);
    CHECK(b.position() == saved);
    for (const Batch& e : expected) CHECK(next(b) == e);

    // Val-style use: reset() goes back to the very first batch.
    gpt2::DataLoader fresh(shards, 2, 16, rank, 2);
    const Batch first = next(fresh);
    b.reset();
    CHECK(next(b) == first);
  }
  // Shuffled: the batch count alone decides (shard and offset follow), across epochs too.
  for (int rank = 0; rank < 2; ++rank) {
    gpt2::DataLoader a(shards, 2, 16, rank, 2, gpt2::DataOrder::shuffle(3));
    const uint64_t epoch = a.total_batches();
    const auto [saved, expected] = position_and_batches_after(a, epoch - 2, 2 * epoch);  // into two new epochs
    CHECK(saved.batch == epoch - 2);
    gpt2::DataLoader b(shards, 2, 16, rank, 2, gpt2::DataOrder::shuffle(3));
    b.seek({0, 0, saved.batch});
    CHECK(b.position() == saved);
    for (const Batch& e : expected) CHECK(next(b) == e);
  }
  fs::remove_all(dir);
}

// The first input token of each of the next n batches: with make_shard's tokens it names
// the shard (1000s or 5000s) and the offset the batch starts at.
std::vector<int32_t> starts(gpt2::DataLoader& dl, uint64_t n) {
  std::vector<int32_t> out;
  for (uint64_t k = 0; k < n; ++k) out.push_back(next(dl).x[0]);
  return out;
}

TEST_CASE("gpt2_text loader: shuffled, every global batch once per epoch, in an order fixed by the seed") {
  const fs::path dir = scratch_dir("loader_shuffled");
  // B=2, T=8, world=1: shard 0 holds 6 global batches, shard 1 holds 2 (as above)
  make_shard(dir / "c_train_000.bin", 1000, 100);
  make_shard(dir / "c_train_001.bin", 5000, 40);
  const auto shards = gpt2::list_shards(dir, "train");
  gpt2::DataLoader seq(shards, 2, 8, 0, 1);
  gpt2::DataLoader shuf(shards, 2, 8, 0, 1, gpt2::DataOrder::shuffle(7));
  REQUIRE(shuf.total_batches() == 8);
  std::vector<int32_t> in_order = starts(seq, 8);
  std::sort(in_order.begin(), in_order.end());
  std::vector<std::vector<int32_t>> epochs;
  for (int e = 0; e < 4; ++e) {
    epochs.push_back(starts(shuf, 8));
    std::vector<int32_t> sorted = epochs.back();
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == in_order);  // each global batch exactly once
    // a shard is visited as one block (its batches in a row), so it is read once per epoch
    int blocks = 1;
    for (size_t k = 1; k < 8; ++k) blocks += (epochs.back()[k] >= 5000) != (epochs.back()[k - 1] >= 5000);
    CHECK(blocks == 2);
    CHECK(shuf.position().batch == uint64_t(8 * (e + 1)));
  }
  std::vector<int32_t> sequential = starts(seq, 8);  // seq has wrapped: its second epoch
  CHECK(epochs[0] != sequential);
  CHECK(epochs[0] != epochs[1]);
  CHECK(epochs[1] != epochs[2]);
  // the same seed gives the same order in a new loader; another seed another order
  gpt2::DataLoader again(shards, 2, 8, 0, 1, gpt2::DataOrder::shuffle(7));
  gpt2::DataLoader other(shards, 2, 8, 0, 1, gpt2::DataOrder::shuffle(8));
  std::vector<int32_t> again_all, other_all, shuf_all;
  for (const auto& e : epochs) shuf_all.insert(shuf_all.end(), e.begin(), e.end());
  again_all = starts(again, 32);
  other_all = starts(other, 32);
  CHECK(again_all == shuf_all);
  CHECK(other_all != shuf_all);
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text loader: shuffled, ranks take disjoint slices of the same global batch") {
  const fs::path dir = scratch_dir("loader_shuffled_ranks");
  make_shard(dir / "d_train.bin", 0, 1000);
  const int world = 3;
  const size_t B = 2, T = 5, bt = B * T;
  std::vector<gpt2::DataLoader> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back(std::vector{dir / "d_train.bin"}, B, T, r, world, gpt2::DataOrder::shuffle(11));
  for (int k = 0; k < 40; ++k) {  // more than one epoch ((1000 - 1) / 30 = 33 global batches)
    const Batch r0 = next(ranks[0]);
    CHECK(r0.x[0] % int32_t(world * bt) == 0);  // a global batch boundary
    for (int r = 1; r < world; ++r) CHECK(next(ranks[size_t(r)]).x[0] == r0.x[0] + r * int32_t(bt));
  }
  fs::remove_all(dir);
}

TEST_CASE("gpt2_text loader: bad arguments and positions are rejected") {
  const fs::path dir = scratch_dir("loader_bad");
  make_shard(dir / "f_val.bin", 0, 64);
  const std::vector<fs::path> one{dir / "f_val.bin"};
  CHECK_THROWS_WITH_AS(gpt2::DataLoader(one, 4, 16, 0, 1),
                       doctest::Contains("has 64 tokens, fewer than one global batch needs"),
                       gpt2::TextError);
  CHECK_THROWS_WITH_AS(gpt2::DataLoader(one, 1, 8, 2, 2), doctest::Contains("rank 2 of world size 2"),
                       gpt2::TextError);
  gpt2::DataLoader dl(one, 1, 8, 0, 1);
  CHECK_THROWS_WITH_AS(dl.seek({3, 0}), doctest::Contains("names shard 3 but there are only 1"),
                       gpt2::TextError);
  CHECK_THROWS_WITH_AS(dl.seek({0, 65}), doctest::Contains("offset 65 is beyond the end"),
                       gpt2::TextError);
  std::vector<int32_t> small(4), ok(8);
  CHECK_THROWS_WITH_AS(dl.next_batch(small, ok), doctest::Contains("expected B*T = 8"),
                       gpt2::TextError);
  CHECK_THROWS_WITH_AS(gpt2::list_shards(dir, "train"), doctest::Contains("no \"*_train*.bin\" files"),
                       gpt2::TextError);
  fs::remove_all(dir);
}
