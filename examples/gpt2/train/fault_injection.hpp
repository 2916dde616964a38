// fault_injection.hpp: hidden, environment-driven faults for the robustness tests — a
// rank killed in the middle of writing its checkpoint file, a non-finite value injected
// into one unit's gradient or the loss, a rank that stalls before a step. Off unless
// the variable is set; read once.
//
//   TAGC_GPT2_INJECT_KILL=STEP:RANK        rank RANK sends itself SIGKILL halfway through
//                                          writing its checkpoint file of step STEP
//   TAGC_GPT2_INJECT_KILL_MODEL=1          rank 0 sends itself SIGKILL once the --save-model
//                                          file is written but not yet in place
//   TAGC_GPT2_INJECT_NAN=STEP:UNIT:RANK    during step STEP (1-based), rank RANK's local
//                                          gradient of UNIT (a unit name: "embed",
//                                          "attn.0", "mlp.1", "lnf"; "UNIT/suffix" for its
//                                          plain segment) gets a NaN before its reduce-scatter;
//                                          UNIT "loss": that rank's loss is NaN
//   TAGC_GPT2_INJECT_STALL=STEP:RANK:SEC   rank RANK sleeps SEC seconds before step STEP
//                                          (as a SIGSTOPped or swapping rank would)
// defines: train::fault
#pragma once

#include <optional>
#include <string>

namespace train::fault {

struct NanAt {
  int step = 0, rank = 0;
  std::string unit;  // unit name, "name/suffix", or "loss"
  bool suffix = false;
};

// Each returns the fault for this process if its variable is set and well formed;
// a malformed value throws std::invalid_argument naming the variable.
std::optional<NanAt> nan_at();
// Called by the checkpoint writer: kills this process if the fault names (step, rank).
void maybe_kill_in_save(int step, int rank);
// Called between writing the --save-model file aside and renaming it in.
void maybe_kill_in_model_save();
// Called before each step: sleeps if the fault names (step, rank).
void maybe_stall(int step, int rank);

}  // namespace train::fault
