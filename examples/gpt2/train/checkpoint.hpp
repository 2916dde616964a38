// checkpoint.hpp: one file per rank holding everything that rank needs to continue a
// run exactly: its parameter shards, AdamW m and v, every segment reducer's
// error-feedback state, the data loader position, the step and the RNG state.
//
// File D/rank<r>.ckpt (little-endian):
//   CheckpointHeader (magic "TGPT2CK\0", version, the run's shape: model config, batch,
//   compression — version 3 adds the values and index-exchange policies —, world size,
//   rank) | segment plan (version 2: segment count + one
//   byte per segment, train::SegmentPath; byte count + the --compress auto decision
//   as JSON, empty for the other modes) | params | m | v (owned_size floats each) |
//   reducer count, then per reducer: byte count + bytes (tagc::Reducer::save_state()).
// Version 1 files (no segment plan) and version 2 (shorter header) are still read.
// Written to "<file>.tmp", flushed and renamed, so a crash mid-save leaves the previous
// checkpoint intact. Every rank writes its own file; the step in each header lets a
// resume check that all ranks' files belong to the same save.
#pragma once

#include "args.hpp"
#include "gpt2/config.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace train {

struct CheckpointHeader {
  char magic[8] = {'T', 'G', 'P', 'T', '2', 'C', 'K', '\0'};
  uint32_t version = 4;
  int32_t world = 1, rank = 0;
  int32_t L = 0, C = 0, NH = 0, maxT = 0, V = 0, Vp = 0;
  int32_t B = 0, T = 0, accum = 1;
  int32_t compress = 0, ratio = 0, index_bits = 0, decoder = 0, adaptive = 0;
  double sparsity = -1.0;
  uint64_t owned_size = 0;
  uint64_t step = 0;
  uint64_t loader_shard = 0, loader_offset = 0;
  uint64_t rng_state = 0;
  // version 3: the value and index-exchange policies (older files: sketch, all-reduce).
  // index_bits above holds index_bits_exact (0) for --index-bits exact.
  int32_t values = 0, index_exchange = 0;
  // version 4: the sparsity schedule (older files: none)
  int32_t sparsity_warmup = 0, sparsity_linear = 0;
  double sparsity_start = 0.75;
};
// The header as versions 1 and 2 wrote it: everything before `values`.
inline constexpr size_t checkpoint_header_v2_size = offsetof(CheckpointHeader, values);
inline constexpr size_t checkpoint_header_v3_size = offsetof(CheckpointHeader, sparsity_warmup);

struct CheckpointData {
  CheckpointHeader header;
  std::vector<uint8_t> segment_paths;  // empty in version 1 files
  std::string auto_json;               // --compress auto: the decision (to_json(AutoPlan))
  std::vector<float> params, m, v;
  std::vector<std::vector<std::byte>> reducer_states;
};

// Header fields that describe the run (everything except step, loader, RNG).
CheckpointHeader run_header(const gpt2::Config& cfg, const Args& a, int world, int rank, uint64_t owned_size);

std::filesystem::path rank_checkpoint_path(const std::filesystem::path& dir, int rank);
// Throws std::runtime_error naming the file on any I/O problem.
void write_checkpoint(const std::filesystem::path& dir, const CheckpointData& data);
// Reads dir/rank<r>.ckpt and checks it against `expect` (a run_header of this run):
// throws std::runtime_error saying which field differs ("world size 2, this run 1").
CheckpointData read_checkpoint(const std::filesystem::path& dir, const CheckpointHeader& expect);
// The same, header and segment plan only (params, m, v and reducer states left empty).
CheckpointData read_checkpoint_plan(const std::filesystem::path& dir, const CheckpointHeader& expect);

}  // namespace train
