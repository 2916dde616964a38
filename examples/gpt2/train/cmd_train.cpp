// cmd_train.cpp: the "train" command of both executables — set up the rank (this
// executable's backend: session.hpp), then the loop: step, log, validate, checkpoint; at
// the end a final validation, checkpoint and model export.
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

#include <mpi.h>

#include <cstdio>
#include <memory>

namespace train {

int cmd_train(const Args& cli) {
  Args a = cli;  // --init-from may set the model shape
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::unique_ptr<Watchdog> watchdog;
  std::unique_ptr<Session> t;
  bool training = false;  // past setup: an error on one rank may leave others in a collective
  try {
    a = with_init_shape(cli);  // before the checks that size the model
    watchdog = start_run(a);  // settings agree across ranks, world size and memory fit
    t = open_session(a);
    if (!a.resume.empty()) t->load_checkpoint(a.resume);
    else if (!a.init_from.empty()) t->init_from_llmc(a.init_from);
    else t->init_from_seed();

    Metrics metrics(a, rank == 0, t->step());
    for (const std::string& note : t->resume_notes()) metrics.message("resume: " + note);
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
    training = true;

    // --val-every: also before the first step, as llm.c does (a val line at step 0); not
    // on a resumed run (its start was validated before the checkpoint, or is not on the period)
    if (a.val_every > 0 && a.val_batches > 0 && t->step() == 0 && a.steps > 0)
      metrics.val(0, t->evaluate_batches(a.val_batches));
    while (t->step() < a.steps) {
      const StepMetrics m = t->train_step();
      metrics.step(m);
      if (a.val_every > 0 && a.val_batches > 0 && m.step % a.val_every == 0 && m.step < a.steps)
        metrics.val(m.step, t->evaluate_batches(a.val_batches));
      if (!a.checkpoint_dir.empty() && a.checkpoint_every > 0 && m.step % a.checkpoint_every == 0)
        t->save_checkpoint(a.checkpoint_dir);
    }
    if (a.val_batches > 0) metrics.val(t->step(), t->evaluate_batches(a.val_batches));
    if (!a.checkpoint_dir.empty() && (a.checkpoint_every == 0 || t->step() % a.checkpoint_every != 0))
      t->save_checkpoint(a.checkpoint_dir);
    if (!a.save_model.empty()) {
      const std::vector<float> flat = t->gather_model();
      t->agree("--save-model", [&] {
        if (rank == 0) gpt2::save_checkpoint(a.save_model, t->config(), flat);
      });
      metrics.message("wrote " + a.save_model);
    }
  } catch (const std::exception& e) {
    return report_failure(e, program_name(), training, watchdog.get(), a);
  }
  return 0;
}

}  // namespace train
