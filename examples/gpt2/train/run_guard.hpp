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
//   4. the memory estimate fits each host (preflight.hpp), agreed across ranks;
//   5. every path a rank alone will write is checked up front on that rank (--log and
//      --save-model on rank 0; --checkpoint-dir: rank 0 takes its lock (dir_lock.hpp),
//      then every rank writes a probe file in it), agreed: any rank's failure ends every
//      rank within seconds, each printing the failing rank's message.
// Every failure is thrown on every rank with the same message.
//
// report_failure: prints "<program>: error (rank r): ..." and, for a collective that
// timed out, the watchdog's census naming the ranks that did not arrive; then ends the
// job (MPI_Abort) when other ranks may still wait in a collective (after start-up, or on
// a timeout). Returns the exit code (1) otherwise.
// defines: train::start_run, train::report_failure
#pragma once

#include "args.hpp"
#include "dir_lock.hpp"
#include "watchdog.hpp"

#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace train {

struct StartedRun {
  std::unique_ptr<Watchdog> watchdog;
  std::unique_ptr<DirLock> lock;   // --checkpoint-dir's, on rank 0 (held until the run ends)
  std::vector<std::string> notes;  // e.g. a stale lock replaced
};
StartedRun start_run(const Args& a);
int report_failure(const std::exception& e, const char* program, bool training, Watchdog* watchdog,
                   const Args& a);

}  // namespace train
