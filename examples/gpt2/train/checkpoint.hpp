// checkpoint.hpp: one rank's checkpoint file — everything that rank needs to continue a
// run exactly: its parameter shards, AdamW m and v, every segment reducer's
// error-feedback state, the data loader position, the step and the RNG state.
// How the files of all ranks form one save (step directories, manifest, fallback) is
// checkpoint_store.hpp's business.
//
// File layout (little-endian), version 6 (5 without the run id, 4 also without the data
// order in the header):
//   CheckpointHeader (magic "TGPT2CK\0", version, the run's shape: model config, batch,
//   compression, world size, rank, step, loader position, RNG state)
//   | segment plan: u64 count + one byte per segment (train::SegmentPath), u64 bytes +
//     the --compress auto decision as JSON (empty for the other modes)
//   | params | m | v (owned_size floats each)
//   | u64 reducer count, then per reducer: u64 byte count + bytes (Reducer::save_state())
//   | trailer: "TGCRC\0\0\0", u32 section count, u32 CRC-32C of each section (header,
//     plan, params, m, v, each reducer state), u32 CRC-32C of the trailer before it.
// Versions 1-3 (no trailer, so no checksums; v1 no segment plan, v1-v2 a shorter header)
// are still read, from the older one-directory layout (read_checkpoint).
#pragma once

#include "args.hpp"
#include "gpt2/config.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace train {

struct CheckpointHeader {
  char magic[8] = {'T', 'G', 'P', 'T', '2', 'C', 'K', '\0'};
  uint32_t version = 6;
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
  // index_bits above holds tagc::index_auto (0) for --index-bits exact. The choices are
  // stored as their header_code (below).
  int32_t values = 0, index_exchange = 0;
  // version 4: the sparsity schedule (older files: none); version 4 files also end in the CRC trailer
  int32_t sparsity_warmup = 0, sparsity_linear = 0;
  double sparsity_start = 0.75;
  // version 5: the order of the training batches (older files: in order) and the count
  // of global batches served, from which a shuffled order continues
  int32_t shuffle = 0, reserved = 0;
  uint64_t shuffle_seed = 0;
  uint64_t loader_batch = 0;
  // version 6: the run that wrote the file (checkpoint_store.hpp: a random id drawn at a
  // fresh start, kept across resumes; 0 in older files: any run's)
  uint64_t run_id = 0;
};
// The header's codes for the reducer's choices (values, index_exchange, decoder,
// sparsity_linear): fixed here, one row per value, never derived from an enum's order, so
// files of every version read the same (version 3 wrote packed-bf16 as 2, sketch-bf16 as
// 3). A new choice takes the next free code; a code is never reused.
template <class E>
struct HeaderCode {
  E value;
  int32_t code;
};
inline constexpr HeaderCode<tagc::values_kind> values_codes[] = {
    {tagc::values_kind::sketch, 0},      {tagc::values_kind::packed, 1},      {tagc::values_kind::packed_bf16, 2},
    {tagc::values_kind::sketch_bf16, 3}, {tagc::values_kind::sketch_fp16, 4}, {tagc::values_kind::packed_fp16, 5}};
inline constexpr HeaderCode<tagc::index_exchange> index_exchange_codes[] = {{tagc::index_exchange::all_reduce, 0},
                                                                            {tagc::index_exchange::reduce_scatter, 1}};
inline constexpr HeaderCode<tagc::decode_mode> decoder_codes[] = {
    {tagc::decode_mode::peel, 0}, {tagc::decode_mode::estimate, 1}, {tagc::decode_mode::peel_then_estimate, 2}};
inline constexpr HeaderCode<tagc::schedule_shape> schedule_shape_codes[] = {{tagc::schedule_shape::exponential, 0},
                                                                            {tagc::schedule_shape::linear, 1}};
constexpr std::span<const HeaderCode<tagc::values_kind>> header_codes(tagc::values_kind) { return values_codes; }
constexpr std::span<const HeaderCode<tagc::index_exchange>> header_codes(tagc::index_exchange) { return index_exchange_codes; }
constexpr std::span<const HeaderCode<tagc::decode_mode>> header_codes(tagc::decode_mode) { return decoder_codes; }
constexpr std::span<const HeaderCode<tagc::schedule_shape>> header_codes(tagc::schedule_shape) { return schedule_shape_codes; }

// The code of `e` (-1: none, which the check below rules out for every choice --values takes).
template <class E>
constexpr int32_t header_code(E e) {
  for (const auto& row : header_codes(e))
    if (row.value == e) return row.code;
  return -1;
}
// The choice a code stands for, by the library's name ("?(7)" for a code no row has).
template <class E>
std::string header_code_name(E, int32_t code) {
  for (const auto& row : header_codes(E{}))
    if (row.code == code) return std::string(tagc::to_string(row.value));
  return "?(" + std::to_string(code) + ")";
}
static_assert(
    [] {
      for (const auto& row : tagc::values_kinds)
        if (!tagc::is_plain(row.value) && header_code(row.value) < 0) return false;
      return true;
    }(),
    "tagc-gpt2: a values kind --values takes has no code in values_codes (checkpoint.hpp): give it the next free one");

// The header as versions 1 and 2 wrote it: everything before `values`.
inline constexpr size_t checkpoint_header_v2_size = offsetof(CheckpointHeader, values);
inline constexpr size_t checkpoint_header_v3_size = offsetof(CheckpointHeader, sparsity_warmup);
inline constexpr size_t checkpoint_header_v4_size = offsetof(CheckpointHeader, shuffle);
inline constexpr size_t checkpoint_header_v5_size = offsetof(CheckpointHeader, run_id);

struct CheckpointData {
  CheckpointHeader header;
  std::vector<uint8_t> segment_paths;  // empty in version 1 files
  std::string auto_json;               // --compress auto: the decision (to_json(AutoPlan))
  std::vector<float> params, m, v;
  std::vector<std::vector<std::byte>> reducer_states;
};

// The file is damaged or missing (truncated, a checksum fails, unreadable): another
// save may still be good. The message names the file and what is wrong.
struct CheckpointDamaged : std::runtime_error { using std::runtime_error::runtime_error; };
// The file is intact but belongs to another configuration (world size, model, batch,
// compression, --sparsity ...): no older save of the same directory will fit either.
struct CheckpointMismatch : std::runtime_error { using std::runtime_error::runtime_error; };

// Size and CRC-32C of a whole file, as the manifest records them.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Header fields that describe the run (everything except step, loader, RNG).
CheckpointHeader run_header(const gpt2::Config& cfg, const Args& a, int world, int rank, uint64_t owned_size);

// Writes a version-6 file durably (durable_file.hpp). Throws std::runtime_error naming
// the file on any I/O problem. Fault injection: TAGC_GPT2_INJECT_KILL (fault_injection.hpp).
FileDigest write_checkpoint_file(const std::filesystem::path& path, const CheckpointData& data);

// What a file's header is checked against. A run has one configuration identity, its
// run configuration (run_config.hpp), which every step's manifest records and a resume
// compares (resume_differences): a file read under a manifest is checked for its place
// only (world size, rank, owned shard size). The header's copy of the configuration
// (model, batch, compression, data order) is the identity of the older layout only,
// whose files have no manifest.
enum class HeaderCheck { placement, configuration };

// Parses a file of any version from `in` (`name` for messages), checks its header against
// `expect` (a run_header of this run; `check`: what of it) and, for version 4, every
// section's checksum; with `whole` given, also the whole file's size and CRC (from the
// manifest). Throws CheckpointDamaged or CheckpointMismatch; reads no more than the file
// holds (a corrupt count is refused before anything is allocated for it). plan_only:
// stops after the segment plan (params, m, v, reducer states left empty; no checksum of
// the rest).
CheckpointData parse_checkpoint(std::istream& in, const std::string& name, const CheckpointHeader& expect,
                                const FileDigest* whole = nullptr, bool plan_only = false,
                                HeaderCheck check = HeaderCheck::configuration);
CheckpointData read_checkpoint_file(const std::filesystem::path& path, const CheckpointHeader& expect,
                                    const FileDigest* whole = nullptr, bool plan_only = false,
                                    HeaderCheck check = HeaderCheck::configuration);

// The older layout (versions 1-3): D/rank<r>.ckpt directly in the directory.
std::filesystem::path rank_checkpoint_path(const std::filesystem::path& dir, int rank);
CheckpointData read_checkpoint(const std::filesystem::path& dir, const CheckpointHeader& expect);

}  // namespace train
