// data_loader.cpp: see the header for the batching rule.
#include "data_loader.hpp"
#include "text_error.hpp"
#include "token_shard.hpp"

#include "gpt2/splitmix64.hpp"  // the model's generator, header only: the order replays on any build

#include <algorithm>
#include <string>

namespace gpt2 {
namespace {

// The generator state for one permutation: the run's seed, the epoch and which
// permutation of that epoch (a shard's index, or kShardOrder for the order of the shards).
constexpr uint64_t kShardOrder = ~uint64_t(0);
uint64_t permutation_stream(uint64_t seed, uint64_t epoch, uint64_t which) {
  uint64_t s = seed;
  uint64_t e = splitmix64(s) ^ epoch;
  uint64_t w = splitmix64(e) ^ which;
  return splitmix64(w);
}

// out = a uniformly random permutation of 0..n-1 (Fisher-Yates; the index for each swap is
// a 64-bit draw scaled to the range by a 128-bit multiply, bias below 2^-40 for any n here).
void draw_permutation(std::vector<uint64_t>& out, uint64_t n, uint64_t state) {
  out.resize(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = i;
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = uint64_t((unsigned __int128)splitmix64(state) * i >> 64);
    std::swap(out[i - 1], out[j]);
  }
}

}  // namespace

DataLoader::DataLoader(std::vector<std::filesystem::path> shards, size_t B, size_t T, int rank,
                       int world, DataOrder order)
    : shards_(std::move(shards)), B_(B), T_(T), rank_(rank), world_(world), order_(order) {
  if (shards_.empty()) throw TextError("gpt2::DataLoader: no shard files given");
  if (B == 0 || T == 0) {
    throw TextError("gpt2::DataLoader: batch size B=" + std::to_string(B) +
                    " and sequence length T=" + std::to_string(T) + " must both be >= 1");
  }
  if (world < 1 || rank < 0 || rank >= world) {
    throw TextError("gpt2::DataLoader: rank " + std::to_string(rank) + " of world size " +
                    std::to_string(world) + "; expected 0 <= rank < world");
  }
  for (const auto& path : shards_) {
    const uint64_t n = read_shard_header(path);
    if (n < global_batch_tokens() + 1) {
      throw TextError("token shard " + path.string() + ": has " + std::to_string(n) +
                      " tokens, fewer than one global batch needs (world*B*T + 1 = " +
                      std::to_string(global_batch_tokens() + 1) + ")");
    }
    shard_tokens_.push_back(n);
    total_batches_ += (n - 1) / global_batch_tokens();
  }
  reset();
}

void DataLoader::ensure_loaded(uint64_t shard) {
  if (loaded_shard_ == shard) return;
  tokens_ = read_shard(shards_[shard]);
  // The header was checked in the constructor; a different size now means the file was
  // replaced underneath us, and the saved positions would no longer mean anything.
  if (tokens_.size() != shard_tokens_[shard]) {
    throw TextError("token shard " + shards_[shard].string() + ": changed size since the " +
                    "loader opened it (" + std::to_string(shard_tokens_[shard]) + " -> " +
                    std::to_string(tokens_.size()) + " tokens)");
  }
  if (vocab_size_ > 0)
    for (size_t i = 0; i < tokens_.size(); ++i)
      if (tokens_[i] >= vocab_size_) {
        const std::string bad = std::to_string(tokens_[i]), at = std::to_string(i);
        tokens_.clear();
        loaded_shard_ = ~uint64_t(0);
        throw TextError("token shard " + shards_[shard].string() + ": token id " + bad + " at token offset " + at +
                        " (byte " + std::to_string(kShardHeaderBytes + 2 * uint64_t(std::stoull(at))) +
                        ") is outside the model's vocabulary of " + std::to_string(vocab_size_) +
                        " ids (a shard of another tokenizer, or a damaged file?)");
      }
  loaded_shard_ = shard;
}

void DataLoader::locate_shuffled() {
  const uint64_t epoch = pos_.batch / total_batches_;
  uint64_t rest = pos_.batch % total_batches_;
  if (perm_epoch_ != epoch) {
    draw_permutation(shard_order_, shards_.size(), permutation_stream(order_.seed, epoch, kShardOrder));
    perm_epoch_ = epoch;
    perm_shard_ = UINT64_MAX;
  }
  size_t k = 0;
  while (rest >= shard_batches(shard_order_[k])) rest -= shard_batches(shard_order_[k++]);
  const uint64_t shard = shard_order_[k];
  if (perm_shard_ != shard) {
    draw_permutation(batch_order_, shard_batches(shard), permutation_stream(order_.seed, epoch, shard));
    perm_shard_ = shard;
  }
  pos_.shard = shard;
  pos_.offset = batch_order_[rest] * global_batch_tokens();
}

void DataLoader::seek(LoaderPosition pos) {
  if (order_.shuffled) {
    pos_.batch = pos.batch;
    locate_shuffled();
    return;
  }
  if (pos.shard >= shards_.size()) {
    throw TextError("gpt2::DataLoader: position names shard " + std::to_string(pos.shard) +
                    " but there are only " + std::to_string(shards_.size()) + " shards");
  }
  if (pos.offset > shard_tokens_[pos.shard]) {
    throw TextError("gpt2::DataLoader: position offset " + std::to_string(pos.offset) +
                    " is beyond the end of " + shards_[pos.shard].string() + " (" +
                    std::to_string(shard_tokens_[pos.shard]) + " tokens)");
  }
  if (!batch_fits(pos.shard, pos.offset)) pos = {(pos.shard + 1) % shards_.size(), 0, pos.batch};
  pos_ = pos;
}

void DataLoader::next_batch(std::span<int32_t> inputs, std::span<int32_t> targets) {
  const size_t bt = B_ * T_;
  if (inputs.size() != bt || targets.size() != bt) {
    throw TextError("gpt2::DataLoader::next_batch: spans hold " + std::to_string(inputs.size()) +
                    " inputs and " + std::to_string(targets.size()) +
                    " targets; expected B*T = " + std::to_string(bt) + " each");
  }
  ensure_loaded(pos_.shard);
  const uint16_t* slice = tokens_.data() + pos_.offset + uint64_t(rank_) * bt;
  for (size_t i = 0; i < bt; ++i) {
    inputs[i] = slice[i];
    targets[i] = slice[i + 1];
  }
  // Advance to the next global batch; sequential: if it would not fit, the next shard
  // (wrapping); shuffled: the next in the epoch's order.
  seek({pos_.shard, pos_.offset + global_batch_tokens(), pos_.batch + 1});
}

std::vector<std::filesystem::path> list_shards(const std::filesystem::path& where,
                                               std::string_view split) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(where, ec)) return {where};
  if (!std::filesystem::is_directory(where, ec)) {
    throw TextError("shards: " + where.string() + " is neither a shard file nor a directory");
  }
  std::string tag = "_";  // built with += : GCC 12 misfires -Wrestrict on "_" + string
  tag += split;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(where)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && entry.path().extension() == ".bin" &&
        name.find(tag) != std::string::npos) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    throw TextError("shards: no \"*" + tag + "*.bin\" files in " + where.string() +
                    " (run the trainer's prepare command first)");
  }
  return found;
}

}  // namespace gpt2
