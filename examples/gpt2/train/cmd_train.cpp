// cmd_train.cpp: the "train" command of both executables — set up the rank (this
// executable's backend: session.hpp), then the loop: step, log, judge (the divergence
// guard), validate, checkpoint, stop on SIGTERM/SIGINT; at the end a final validation,
// checkpoint and model export (written aside, fsynced, renamed).
// defines: train::cmd_train
#include "commands.hpp"

// defines: train::Session, train::open_session, train::program_name
#include "session.hpp"
// defines: train::Metrics
#include "metrics.hpp"
// defines: gpt2::save_checkpoint (llm.c format)
#include "gpt2/checkpoint.hpp"
// defines: train::start_run, train::report_failure
#include "run_guard.hpp"
// defines: train::with_init_shape
#include "model_config.hpp"
// defines: train::DivergenceGuard
#include "divergence_guard.hpp"
// defines: train::install_stop_handlers, train::exit_stopped
#include "stop_signal.hpp"
// defines: train::commit_written_file
#include "durable_file.hpp"
// defines: train::fault::maybe_kill_in_model_save
#include "fault_injection.hpp"
// defines: train::node_count_note
#include "preflight.hpp"

#include <mpi.h>

#include <cstdio>
#include <memory>

namespace train {

int cmd_train(const Args& cli) {
  Args a = cli;  // --init-from may set the model shape
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  install_stop_handlers();  // from here a SIGTERM/SIGINT asks for a checkpoint and a clean exit
  StartedRun started;
  std::unique_ptr<Session> t;
  bool training = false;  // past setup: an error on one rank may leave others in a collective
  try {
    a = with_init_shape(cli);  // before the checks that size the model
    started = start_run(a);  // settings agree, world size and memory fit, paths writable, the lock
    t = open_session(a);
    if (!a.resume.empty()) t->load_checkpoint(a.resume);
    else if (!a.init_from.empty()) t->init_from_llmc(a.init_from);
    else t->init_from_seed();
    if (!a.checkpoint_dir.empty()) {
      t->claim_checkpoint_dir(a.checkpoint_dir);  // no other run's steps in it; this run owns it
      if (started.lock) started.lock->set_run(run_id_text(t->run_id()));
    }

    Metrics metrics(a, rank == 0, t->step());
    for (const std::string& note : started.notes) metrics.message(note);
    for (const std::string& note : t->resume_notes()) metrics.message("resume: " + note);
    // A resumed run past --steps has nothing to do: say so (the same verdict on every rank).
    if (t->step() > a.steps)
      throw AgreedError("--steps " + std::to_string(a.steps) + " is below the checkpoint's step " +
                        std::to_string(t->step()) + ": nothing to train (pass --steps above " +
                        std::to_string(t->step()) + " to continue)");
    if (t->step() == a.steps && !a.resume.empty())
      metrics.message("resume: the checkpoint is at step " + std::to_string(t->step()) + " = --steps: nothing to train");
    const uint64_t val_available = t->val_batches_available();
    if (a.val_batches > 0 && uint64_t(a.val_batches) > val_available) {
      metrics.message("--val-batches " + std::to_string(a.val_batches) + ": the validation data holds " +
                      std::to_string(val_available) + " global batch(es) of " + std::to_string(world) + " x " +
                      std::to_string(a.B) + " x " + std::to_string(a.T) + " tokens: using " +
                      std::to_string(val_available) + " (more would repeat them)");
      a.val_batches = int(val_available);
    }
    const auto& c = t->config();
    const std::string model_name = a.shape_given || a.init_from.empty()
                                       ? a.model
                                       : "the shape of " + a.init_from;  // --init-from set L, C, NH, maxT
    nlohmann::json info = {{"world", world},
                           {"backend", t->backend()},
                           {"model", model_name},
                           {"L", c.num_layers},
                           {"C", c.channels},
                           {"NH", c.num_heads},
                           {"params", t->num_parameters()},
                           {"B", a.B},
                           {"T", a.T},
                           {"accum", a.accum},
                           {"steps", a.steps},
                           {"zero2", a.zero2},
                           {"resumed_at", t->step()}};
    info.update(compression_info(a));  // only the flags that apply
    // --compress auto: the decision per segment, in the first line of the log
    if (const AutoPlan* p = t->auto_plan()) info["auto"] = to_json(*p);
    metrics.run_info(info);
    metrics.message(std::string(program_name()) + ": " + std::to_string(world) + " rank(s) on " + t->backend() +
                    ", " + model_name + " (" +
                    std::to_string(t->num_parameters()) + " params), B=" + std::to_string(a.B) +
                    " T=" + std::to_string(a.T) + " accum=" + std::to_string(a.accum) +
                    ", " + compression_summary(a) +
                    (t->step() > 0 ? ", resumed at step " + std::to_string(t->step()) : std::string()));
    if (const AutoPlan* p = t->auto_plan()) metrics.message(format_table(*p));
    if (const std::string note = node_count_note(a, t->nodes()); !note.empty()) metrics.message(note);
    training = true;

    DivergenceGuard guard(a);
    int rewinds = 0;
    // The step the checkpoint directory already holds for this state (a resumed run's
    // start): not saved again.
    int saved_step = a.resume.empty() ? -1 : t->step();
    // Saves the current step unless the guard judged it unhealthy; returns why not ("").
    const auto save = [&](const std::string& unhealthy) -> std::string {
      std::string why = unhealthy;
      if (why.empty()) why = t->save_checkpoint(a.checkpoint_dir);
      if (why.empty()) saved_step = t->step();
      else metrics.message("step " + std::to_string(t->step()) + " not saved (divergence guard: " + why + ")");
      return why;
    };
    // --guard-rewind: back to the newest healthy step of this run's directory.
    const auto rewind = [&](const std::string& why) {
      if (a.guard_rewind == 0 || a.checkpoint_dir.empty()) return false;
      if (rewinds++ >= a.guard_rewind)
        throw AgreedError("divergence guard: " + why + "; still unhealthy after " + std::to_string(a.guard_rewind) +
                          " rewind(s) (--guard-rewind): stopping; the healthy steps in " + a.checkpoint_dir +
                          " are kept");
      t->load_checkpoint(a.checkpoint_dir);
      saved_step = t->step();
      metrics.message("divergence guard: " + why + ": rewound to step " + std::to_string(t->step()) + " (rewind " +
                      std::to_string(rewinds) + " of " + std::to_string(a.guard_rewind) + ")");
      return true;
    };

    // --val-every: also before the first step, as llm.c does (a val line at step 0); not
    // on a resumed run (its start was validated before the checkpoint, or is not on the period)
    if (a.val_every > 0 && a.val_batches > 0 && t->step() == 0 && a.steps > 0)
      metrics.val(0, t->evaluate_batches(a.val_batches));
    std::string unhealthy;  // the guard's verdict on the current step
    while (t->step() < a.steps) {
      const StepMetrics m = t->train_step();
      metrics.step(m);
      unhealthy = guard.judge(m.step, m.loss, m.grad_norm);
      if (!unhealthy.empty()) {
        metrics.message("divergence guard: " + unhealthy);
        if (rewind(unhealthy)) continue;
      }
      if (a.val_every > 0 && a.val_batches > 0 && m.step % a.val_every == 0 && m.step < a.steps)
        metrics.val(m.step, t->evaluate_batches(a.val_batches));
      const bool due = a.checkpoint_every > 0 && m.step % a.checkpoint_every == 0;
      if (!a.checkpoint_dir.empty() && (due || m.stop_requested)) {
        const std::string why = save(unhealthy);
        if (!why.empty() && !m.stop_requested && rewind(why)) continue;
      }
      if (m.stop_requested) {  // every rank saw the flag in this step's all-reduce
        metrics.message("stopped by a signal (SIGTERM or SIGINT) after step " +
                        std::to_string(m.step) +
                        (a.checkpoint_dir.empty() ? " (no --checkpoint-dir: nothing saved)"
                         : saved_step == m.step ? ": checkpoint " + a.checkpoint_dir + "/" + step_dir_name(uint64_t(m.step)) +
                                                      " saved; continue with --resume " + a.checkpoint_dir
                                                : " (this step was not saved, see above)"));
        return exit_stopped;
      }
    }
    if (a.val_batches > 0) metrics.val(t->step(), t->evaluate_batches(a.val_batches));
    if (!a.checkpoint_dir.empty() && t->step() != saved_step) save(unhealthy);
    if (!a.save_model.empty()) {
      const std::vector<float> flat = t->gather_model();
      t->agree("--save-model", [&] {
        if (rank != 0) return;
        // Written aside, fsynced, renamed: a kill leaves the previous file, never half of one.
        const std::string tmp = a.save_model + ".tmp";
        gpt2::save_checkpoint(tmp, t->config(), flat);
        fault::maybe_kill_in_model_save();
        commit_written_file(tmp, a.save_model);
      });
      metrics.message("wrote " + a.save_model);
    }
  } catch (const std::exception& e) {
    return report_failure(e, program_name(), training, started.watchdog.get(), a);
  }
  return 0;
}

}  // namespace train
