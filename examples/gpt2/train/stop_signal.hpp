// stop_signal.hpp: SIGTERM and SIGINT as a request to stop cleanly — what a scheduler
// sends before it kills a preempted job (SLURM, Kubernetes; torchrun and mpirun forward
// it to every rank). The first signal sets a flag; the train loop finishes the current
// step, the ranks agree on the flag (it rides on the step's all-reduce, so a signal that
// reached only one rank stops them all at the same step), save a checkpoint and exit with
// exit_stopped. A second signal ends the process at once (128 + the signal's number).
// defines: train::install_stop_handlers, train::stop_requested, train::exit_stopped
#pragma once

namespace train {

// The exit code of a run stopped by SIGTERM/SIGINT after its checkpoint was saved
// (75, EX_TEMPFAIL: "try again" — resume it with --resume).
inline constexpr int exit_stopped = 75;

void install_stop_handlers();
// True once a SIGTERM or SIGINT reached this process (async-signal-safe flag).
bool stop_requested();
// The signal that set it (0: none), for the message.
int stop_signal();

}  // namespace train
