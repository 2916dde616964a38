// checkpoint_store.hpp: checkpoints a crash cannot take away — how the files of all
// ranks form one save, which saves are kept, and which one a resume takes.
//
// Layout of --checkpoint-dir D (a directory every rank sees: one host, or a shared file
// system):
//   D/step_00000006/rank0.ckpt ... rank<W-1>.ckpt   each rank's file (checkpoint.hpp)
//   D/step_00000006/MANIFEST.json                   written last, by rank 0: the step,
//       world size, loss and grad norm of the step, each file's size and CRC-32C, and the
//       run's configuration (run_config.hpp)
//   D/latest                                        "step_00000006": the newest save
// A save: (1) every rank checks its state is finite and rank 0 clears the step
// directory, agreed; (2) every rank writes its file to .tmp, fsyncs it, renames it and
// fsyncs the directory, agreed, and the ranks exchange the files' sizes and CRCs;
// (3) rank 0 writes MANIFEST.json (.tmp + fsync + rename + fsync of the directory),
// then D/latest the same way, then removes all but the newest --keep-checkpoints
// complete steps and every incomplete one, agreed. A step directory without a manifest
// is incomplete and never resumed, so a kill at any point leaves the previous saves.
//
// A resume of D takes the newest step whose manifest exists and whose files all match
// it (size, CRC-32C, each section's own checksum); a missing or damaged file is named
// on the rank that found it, and every rank falls back to the previous complete step
// together (the choice is collective: no rank resumes another step). A file that is
// intact but of another configuration (flags, world size) is an error, not a fallback.
// --resume D/step_00000004 takes that step only. A directory of the older layout
// (D/rank<r>.ckpt, versions 1-3, no checksums) is still loaded, with a note.
#pragma once

#include "checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace train {

// What the store needs from a trainer: its rank, the world size and an in-place
// all-reduce sum over ranks (every rank calls it with the same length, in the same order).
struct RankGroup {
  int rank = 0, world = 1;
  std::function<void(std::span<double>)> sum;
};

// Runs fn on every rank; if it throws on any, throws on all: the local message, or
// "<what> failed on rank(s) ... (see its message)".
void agree_all(RankGroup& g, const std::string& what, const std::function<void()>& fn);

struct SaveInfo {
  int keep = 2;                 // complete steps kept (the newest)
  double loss = 0, grad_norm = 0;  // of the step being saved (refused if not finite)
  nlohmann::json config;        // run_config.hpp: config_json(args)
};

std::string step_dir_name(uint64_t step);  // "step_00000006"

// Every rank calls it together with its own file's data (d.header.step = the step).
// Throws on all ranks if any rank fails (the previous saves stay intact).
void save_step(const std::filesystem::path& dir, const CheckpointData& d, const SaveInfo& info, RankGroup& g);

struct Resumed {
  CheckpointData data;            // this rank's file, verified
  std::filesystem::path from;     // the step directory (or D for the older layout)
  nlohmann::json config;          // the manifest's configuration (null for the older layout)
  std::vector<std::string> notes; // what was skipped and why (rank 0 prints them)
};

// Every rank calls it together. expect: run_header of this run (rank included);
// config_now: config_json(args) of this run, compared with the manifest's
// (run_config.hpp: resume_differences — a field that must match is an error, one that
// may change is a note).
Resumed load_newest(const std::filesystem::path& dir, const CheckpointHeader& expect,
                    const nlohmann::json& config_now, RankGroup& g);

// This rank's header and segment plan of the newest complete step of D (no checksum,
// no collective): how a resumed --compress auto run learns its decision.
CheckpointData read_newest_plan(const std::filesystem::path& dir, const CheckpointHeader& expect);

}  // namespace train
