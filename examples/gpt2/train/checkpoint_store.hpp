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
//   D/RUN                                           the id of the run that owns D
//   D/LOCK                                          held while a run writes D (dir_lock.hpp)
// Every save, manifest and rank file carries the run id (a random 64-bit id drawn at a
// fresh start, kept across resumes). A fresh run refuses a directory that holds another
// run's complete steps; a resume takes only the owner's steps (a foreign step is skipped,
// named); pruning removes only the owner's steps older than the one saved.
// A save: (1) every rank checks its state is finite (and its parameters below the
// divergence guard's bound) and rank 0 makes an aside directory step_N.partial-<run>,
// agreed; (2) every rank writes its file there (.tmp, fsync, rename, fsync), agreed, and
// the ranks exchange the files' sizes and CRCs; (3) rank 0 writes MANIFEST.json (with
// its own CRC) there, then swaps the aside directory in for step_N (an atomic exchange
// where the file system has one; the replaced directory is removed only afterwards),
// then D/latest, then prunes, agreed. Nothing complete is removed before its
// replacement is complete, so a kill at any point leaves every complete step.
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
  uint64_t run_id = 0;          // the run's identity (also in d.header.run_id)
  double param_max = 0;         // divergence guard: a parameter beyond it is not saved (0: off)
};

// "0123456789abcdef"
std::string run_id_text(uint64_t id);
// A fresh random run id, the same on every rank (rank 0 draws it).
uint64_t draw_run_id(RankGroup& g);
// Before a run writes D (collective, after its run id is known): D must not hold complete
// steps of another run (error naming it, on every rank); rank 0 records the id in D/RUN.
void claim_checkpoint_dir(const std::filesystem::path& dir, uint64_t run_id, RankGroup& g);

std::string step_dir_name(uint64_t step);  // "step_00000006"

// Every rank calls it together with its own file's data (d.header.step = the step).
// Throws on all ranks if any rank fails (the previous saves stay intact). Returns "" when
// saved, or why the divergence guard did not save it (the same on every rank).
std::string save_step(const std::filesystem::path& dir, const CheckpointData& d, const SaveInfo& info, RankGroup& g);

struct Resumed {
  CheckpointData data;            // this rank's file, verified
  std::filesystem::path from;     // the step directory (or D for the older layout)
  nlohmann::json config;          // the manifest's configuration (null for the older layout)
  uint64_t run_id = 0;            // the run that wrote it (0: unknown, older files)
  std::vector<std::string> notes; // what was skipped and why (rank 0 prints them)
};

// Every rank calls it together. expect: run_header of this run (rank included), against
// which each file's place is checked (and, in the older layout without manifests, its
// configuration); config_now: config_json(args) of this run, compared with the
// manifest's, the run's one configuration identity (run_config.hpp: resume_differences
// — a field that must match is an error, one that may change is a note).
Resumed load_newest(const std::filesystem::path& dir, const CheckpointHeader& expect,
                    const nlohmann::json& config_now, RankGroup& g);

// This rank's header and segment plan of the newest complete step of D (no checksum,
// no collective), checked like load_newest checks it: how a resumed --compress auto run
// learns its decision.
CheckpointData read_newest_plan(const std::filesystem::path& dir, const CheckpointHeader& expect,
                                const nlohmann::json& config_now);

}  // namespace train
