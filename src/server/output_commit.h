/* output_commit.h - a job's output files committed exactly once, even when the node running it dies.
 *
 * The graph writes a job's SaveImage files into a staging folder of its own, <output>/.kiln-staging/<job id>/
 * (same layout: subfolder/name_00001_.png), never into the output folder. When the graph is done the worker
 * commits:
 *   1. plan: a final name for every staged file - the next free {name}_{NNNNN}_.png counter in the real
 *      subfolder, ComfyUI's rule - and the job's outputs with those names, written to <staging>/commit.json
 *      (temporary name, fsync, rename: the plan exists whole or not at all);
 *   2. link each staged file to its final name (link(2): atomic, never overwrites; a name another node took in
 *      between gets the next counter and the plan is rewritten);
 *   3. the job is recorded finished in the store with the plan's outputs; then the staging folder is removed.
 * A node that claims the job again (lease expired, or SQLite's restart) calls kiln_outputs_begin first: with a
 * plan there, the job's outputs exist already - steps 2-3 are redone (a link already made is recognised by its
 * inode) and nothing runs twice; without one, the staging folder of the dead attempt (a half-written file
 * included) is wiped and the graph runs again. So no output file is ever duplicated or half-written in the output
 * folder. Two live attempts (a node whose lease expired under load while it still ran) share the staging folder:
 * the second to commit adopts the first one's plan. The staging folder must be on the output folder's filesystem
 * (it is inside it) - on a shared output folder every node sees every plan.
 */
#ifndef KILN_SERVER_OUTPUT_COMMIT_H
#define KILN_SERVER_OUTPUT_COMMIT_H

#include <jansson.h>
#include <stdbool.h>

#include "base/status.h"

#define KILN_STAGING_DIR ".kiln-staging"

/* stage (4096 bytes) = <output_dir>/.kiln-staging/<job_id>. *planned = a previous attempt's plan is there: its
 * outputs (owned, the caller decrefs) are in *plan_outputs and the graph must not run again. Otherwise the folder
 * is emptied (made if needed). */
kiln_status kiln_outputs_begin(const char *output_dir, const char *job_id, char *stage, bool *planned,
                               json_t **plan_outputs, kiln_err *err);

/* Steps 1-2 for the outputs the graph returned (type "output" images are staged; others are left as they are).
 * *final_outputs (owned) is outputs with the final names. With planned (a resumed job), only step 2 runs, from
 * the plan. */
kiln_status kiln_outputs_commit(const char *output_dir, const char *stage, const json_t *outputs, bool planned,
                                json_t **final_outputs, kiln_err *err);

/* Step 3's cleanup: removes the staging folder (errors are only logged: a leftover folder is harmless). */
void kiln_outputs_done(const char *stage);

#endif
