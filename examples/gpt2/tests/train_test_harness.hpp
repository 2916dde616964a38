// train_test_harness.hpp: what the trainer's MPI test programs share — a per-job
// scratch directory, learnable synthetic token shards, the tiny model's Args, and a
// doctest main that brackets MPI and agrees on the result across ranks.
//
// Tiny model: L=2, C=64, NH=2, T=32 (the GPT-2 vocabulary, so wte is 3.2M of its
// parameters). OMP_NUM_THREADS=1 (set by ctest) keeps runs bit-reproducible.
#pragma once

#include <doctest/doctest.h>

#include "args.hpp"
#include "token_shard.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace train_test {

namespace fs = std::filesystem;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A per-job scratch directory: rank 0's pid names it, so programs never collide.
inline const fs::path& scratch() {
  static fs::path dir = [] {
    long id = world_rank() == 0 ? long(getpid()) : 0;
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return fs::temp_directory_path() / ("tagc_gpt2_train_test_" + std::to_string(id));
  }();
  return dir;
}

// Learnable synthetic text: repeated "sentences" of a few dozen token ids.
inline void make_data() {
  if (world_rank() == 0) {
    fs::create_directories(scratch());
    std::vector<uint32_t> tokens;
    uint32_t x = 12345;
    for (int i = 0; i < 40000; ++i) {
      if (i % 16 == 0) x = x * 1103515245u + 12345u;  // a new "sentence" start
      tokens.push_back(100 + ((x >> 8) % 23 + uint32_t(i % 16) * 5) % 200);
    }
    gpt2::write_shard(scratch() / "t_train.bin", tokens);
    gpt2::write_shard(scratch() / "t_val.bin", std::span(tokens).subspan(0, 8000));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The tiny model on the synthetic shards, uncompressed, lr 1e-3 cosine, warmup 1.
inline train::Args tiny(int B, int steps) {
  static bool made = (make_data(), true);
  (void)made;
  train::Args a;
  a.command = "train";
  a.model = "d2";
  a.L = 2;
  a.C = 64;
  a.NH = 2;
  a.maxT = 64;
  a.T = 32;
  a.B = B;
  a.steps = steps;
  a.lr = 1e-3f;
  a.schedule = train::Schedule::cosine;
  a.warmup = 1;
  a.compress = train::CompressMode::none;
  a.train_data = (scratch() / "t_train.bin").string();
  a.val_data = (scratch() / "t_val.bin").string();
  a.val_batches = 1;
  return a;
}

// doctest under MPI: every rank runs every case (they are collective); rank 0 reports;
// the job fails if any rank failed; rank 0 removes the scratch directory.
inline int mpi_doctest_main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int rank = world_rank();
  int failed = 1;
  if (provided >= MPI_THREAD_SERIALIZED) {  // the trainers' comm worker thread needs it
    doctest::Context ctx;
    ctx.applyCommandLine(argc, argv);
    if (rank != 0) ctx.setOption("minimal", true);
    failed = ctx.run() != 0 ? 1 : 0;
  } else if (rank == 0) {
    std::fprintf(stderr, "this MPI provides thread level %d, MPI_THREAD_SERIALIZED is needed\n", provided);
  }
  int any = failed;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_all(scratch());
  MPI_Finalize();
  return any;
}

}  // namespace train_test
