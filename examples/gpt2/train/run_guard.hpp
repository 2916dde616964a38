// run_guard.hpp: what the train loop (cmd_train, in tagc-gpt2 and tagc-gpt2-cuda alike)
// does around a run so that nothing hangs and every rank reaches the
// same verdict: the start-up checks before the trainer allocates, and the failure
// report at the end.
//
// start_run (collective, right after MPI_Init):
//   1. the watchdog's communicator (watchdog.hpp);
//   2. the ranks' settings agree (run_config.hpp: check_ranks_agree), within
//      --collective-timeout;
//   3. the world size suits the flags (preflight.hpp: check_world);
//   4. the memory estimate fits each host (preflight.hpp), agreed across ranks.
// Every failure is thrown on every rank with the same message.
//
// report_failure: prints "<program>: error (rank r): ..." and, for a collective that
// timed out, the watchdog's census naming the ranks that did not arrive; then ends the
// job (MPI_Abort) when other ranks may still wait in a collective (after start-up, or on
// a timeout). Returns the exit code (1) otherwise.
// defines: train::start_run, train::report_failure
#pragma once

#include "args.hpp"
#include "watchdog.hpp"

#include <exception>
#include <memory>

namespace train {

std::unique_ptr<Watchdog> start_run(const Args& a);
int report_failure(const std::exception& e, const char* program, bool training, Watchdog* watchdog,
                   const Args& a);

}  // namespace train
