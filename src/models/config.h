/* config.h - reading a HuggingFace/diffusers config.json. Dimensions come from the weights' shapes; configs give
 * what shapes cannot (theta, eps, norm groups, the schedule) and name what kiln must refuse.
 *
 *     json_t *c;
 *     KILN_TRY(kiln_config_open("vae/config.json", &c, &err));   // NULL path or no such file: c = NULL, OK
 *     double eps = kiln_cfg_num(c, "batch_norm_eps", 1e-4);      // absent or null: the default
 *     json_decref(c);
 */
#ifndef KILN_MODELS_CONFIG_H
#define KILN_MODELS_CONFIG_H

#include <jansson.h>
#include <stdbool.h>

#include "base/status.h"

/* Parses path into *out (a JSON object). path NULL/empty or no such file: *out = NULL and KILN_OK (callers use
 * the defaults); a file that is not a JSON object: KILN_E_FORMAT naming the file and the parser's complaint. */
kiln_status kiln_config_open(const char *path, json_t **out, kiln_err *err);

/* Lookups on an opened config (c may be NULL: every key is then absent). A JSON null counts as absent. */
const json_t *kiln_cfg_get(const json_t *c, const char *key);
double kiln_cfg_num(const json_t *c, const char *key, double dflt);
bool kiln_cfg_true(const json_t *c, const char *key); /* present and JSON true */
/* The string value, NULL when absent, null or not a string. */
const char *kiln_cfg_str(const json_t *c, const char *key);

/* Typed checks that fail with "<what>: <key> ..." (what: e.g. "scheduler/scheduler_config.json"). The key may
 * be absent (OK: *out keeps its default). */
kiln_status kiln_cfg_number(const json_t *c, const char *what, const char *key, double *out, kiln_err *err);
kiln_status kiln_cfg_int(const json_t *c, const char *what, const char *key, int *out, kiln_err *err);
kiln_status kiln_cfg_boolean(const json_t *c, const char *what, const char *key, bool *out, kiln_err *err);
/* Refuses a key whose value is present and differs from the one kiln implements (string). */
kiln_status kiln_cfg_expect_str(const json_t *c, const char *what, const char *key, const char *want, kiln_err *err);

#endif
