// data_loader.hpp: batches of (inputs, targets) from token shards, for data-parallel
// training and for evaluation.
//
// The token stream is cut into global batches of world*B*T tokens. Rank r of `world`
// takes the r-th slice of B*T tokens of each global batch, plus one more token, so that
//   inputs[i]  = stream[start + i]        (i < B*T, read as B rows of T)
//   targets[i] = stream[start + i + 1]    (the next token: what the model must predict)
// Ranks therefore see disjoint inputs, and together they cover the global batch exactly.
// Rows are consecutive pieces of the stream (the last target of row b is the first
// input of row b+1), as in llm.c.
//
// A global batch never straddles two shards: when the rest of a shard is too short for
// one, the loader moves to the next shard (after the last, back to the first) and the
// tail is skipped. So the sequence of batches depends only on the shard list, B, T and
// world, and a LoaderPosition (shard index + token offset) saved in a checkpoint
// restores the exact next batch.
//
// Evaluation uses the same class on the val shard(s): reset(), then next_batch() a
// fixed number of times (at most total_batches(), or it wraps and repeats).
//
// Order: sequential (the default: the stream as written, which for a corpus of documents
// in order means the topic drifts batch by batch; llm.c's train_gpt2.c shuffles) or
// shuffled (DataOrder::shuffle(seed)): every pass over the data ("epoch") visits the shards
// in a seeded random order and, within each shard, its global batches in a seeded random
// order; every global batch is still seen exactly once per epoch, ranks still take
// disjoint slices of the same global batch, and the order depends only on the seed, the
// shard list, B, T and world (a splitmix64 stream and a hand-written Fisher-Yates, so it is
// the same with every standard library). The position is then the count of batches served
// (LoaderPosition::batch), from which the epoch, the shard and the batch within it follow.
//
// Usage:
//   gpt2::DataLoader train(gpt2::list_shards("data/shards", "train"), B, T, rank, world);
//   std::vector<int32_t> x(B * T), y(B * T);
//   train.next_batch(x, y);
//   checkpoint.position = train.position();   // ... later: train.seek(checkpoint.position)
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace gpt2 {

// Where the next global batch starts: shards[shard], token offset within it, and how many
// global batches were served before it. Sequential order continues from (shard, offset);
// shuffled order from `batch` alone (shard and offset then only say where that batch lies).
// Plain data, so a checkpoint can store it as three integers.
struct LoaderPosition {
  uint64_t shard = 0;
  uint64_t offset = 0;
  uint64_t batch = 0;
  friend bool operator==(const LoaderPosition&, const LoaderPosition&) = default;
};

// The order in which global batches are served (see the file comment).
struct DataOrder {
  bool shuffled = false;
  uint64_t seed = 0;  // shuffled only
  static DataOrder sequential() { return {}; }
  static DataOrder shuffle(uint64_t seed) { return {true, seed}; }
};

class DataLoader {
 public:
  // Validates every shard's header up front (read_shard_header) and requires each to
  // hold at least one global batch (world*B*T + 1 tokens); throws TextError naming the
  // offending shard otherwise. Requires B, T >= 1 and 0 <= rank < world.
  DataLoader(std::vector<std::filesystem::path> shards, size_t B, size_t T, int rank, int world,
             DataOrder order = DataOrder::sequential());

  // Fills this rank's slice of the next global batch; both spans must hold B*T values.
  // Allocates nothing except when it moves to another shard (the shard is read whole).
  void next_batch(std::span<int32_t> inputs, std::span<int32_t> targets);

  // The position of the batch the next call to next_batch() returns.
  LoaderPosition position() const { return pos_; }
  // Continues from a saved position. Sequential: throws TextError if the shard index or
  // offset is beyond the shard list / shard; a position where no full global batch fits
  // any more (e.g. saved with a smaller world size) moves on to the next shard, as
  // next_batch would. Shuffled: continues with batch number pos.batch (any count is valid:
  // it is a number of batches served, epochs included); shard and offset are recomputed.
  void seek(LoaderPosition pos);
  // Back to the first batch of the first shard.
  void reset() { seek(LoaderPosition{}); }
  // Token ids must be < vocab_size (the model's vocabulary): every shard is checked when
  // it is read, and an id beyond is refused naming the file, the token offset and the
  // byte offset (instead of an out-of-range embedding row later). 0: no check.
  void set_vocab_size(uint32_t vocab_size) { vocab_size_ = vocab_size; }
  // Reads (and checks) the shard of the current position now rather than at the next
  // batch: a trainer calls it at start-up, where every rank can agree on the error.
  void preload() { ensure_loaded(pos_.shard); }

  // Number of global batches in one pass over all shards (the same on every rank).
  uint64_t total_batches() const { return total_batches_; }
  size_t batch_size() const { return B_; }
  const DataOrder& order() const { return order_; }
  size_t seq_len() const { return T_; }
  const std::vector<std::filesystem::path>& shards() const { return shards_; }

 private:
  uint64_t global_batch_tokens() const { return uint64_t(world_) * B_ * T_; }
  bool batch_fits(uint64_t shard, uint64_t offset) const {
    return offset + global_batch_tokens() + 1 <= shard_tokens_[shard];
  }
  void ensure_loaded(uint64_t shard);
  // Shuffled order: points pos_ at batch number pos_.batch (epoch, shard, batch in shard).
  void locate_shuffled();
  uint64_t shard_batches(uint64_t shard) const { return (shard_tokens_[shard] - 1) / global_batch_tokens(); }

  std::vector<std::filesystem::path> shards_;
  std::vector<uint64_t> shard_tokens_;  // token count of each shard, from its header
  size_t B_, T_;
  int rank_, world_;
  uint32_t vocab_size_ = 0;
  uint64_t total_batches_ = 0;
  DataOrder order_;
  LoaderPosition pos_;
  // Shuffled order: the permutations of the epoch / shard they were drawn for (drawn when
  // the loader enters an epoch or a shard, never per batch)
  uint64_t perm_epoch_ = UINT64_MAX, perm_shard_ = UINT64_MAX;
  std::vector<uint64_t> shard_order_;   // epoch perm_epoch_: the shards in visiting order
  std::vector<uint64_t> batch_order_;   // shard perm_shard_ in that epoch: its batches in order
  std::vector<uint16_t> tokens_;        // the shard being read, whole
  uint64_t loaded_shard_ = UINT64_MAX;
};

// The shard files to train or evaluate on. `where` may be one shard file (returned as
// is) or a directory: then every "*.bin" file in it whose name contains "_<split>"
// (e.g. "corpus_train.bin", "fineweb_train_000001.bin"), sorted by name. Throws
// TextError if nothing matches.
std::vector<std::filesystem::path> list_shards(const std::filesystem::path& where,
                                               std::string_view split);

}  // namespace gpt2
