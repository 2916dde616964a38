// make_corpus.cpp: fuzz_make_corpus DIR — writes the seed inputs of the fuzz targets
// (DIR/checkpoint, DIR/token_shard, DIR/reducer_state): one valid input each, so the
// fuzzers start from the formats' real structure. Their output is committed under
// fuzz/corpus/; rerun it when a format changes.
// defines: main
#include "checkpoint.hpp"
#include "token_shard.hpp"

#include "tagc/tagc.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* t : {"checkpoint", "token_shard", "reducer_state"}) fs::create_directories(dir / t);

  // A reducer state: the fuzz target's reducer (length 64, 2 ranks, rank 1), fresh.
  using R = tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>,
                          tagc::DecodePolicy<tagc::decode_mode::peel_then_estimate>>;
  R r;
  tagc::reducer_arguments a;
  a.length = 64;
  a.world_size = 2;
  a.rank = 1;
  a.topo = tagc::topology::sharded;
  a.op = tagc::reduce_op::mean;
  if (!r.initialize(a).ok()) return 1;
  const std::vector<std::byte> state = r.save_state();
  std::ofstream(dir / "reducer_state" / "seed_fresh", std::ios::binary)
      .write(reinterpret_cast<const char*>(state.data()), std::streamsize(state.size()));

  // A checkpoint file as fuzz_checkpoint expects it (world 2, rank 1, 100 owned).
  train::CheckpointData d;
  d.header.world = 2;
  d.header.rank = 1;
  d.header.owned_size = 100;
  d.header.step = 3;
  d.segment_paths = {2, 1, 0, 2};
  for (int i = 0; i < 100; ++i) {
    d.params.push_back(0.01f * float(i));
    d.m.push_back(0.001f * float(i));
    d.v.push_back(1e-6f * float(i));
  }
  d.reducer_states = {state, {}};
  train::write_checkpoint_file(dir / "checkpoint" / "seed_v4", d);

  // A token shard: 64 tokens.
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 64; ++i) tokens.push_back((i * 7919u) % 50257u);
  gpt2::write_shard(dir / "token_shard" / "seed_64", tokens);
  return 0;
}
