/* config.h - reading numbers from a HuggingFace/diffusers config.json (optional extras: dimensions always come
 * from the weights' shapes; configs give only what shapes cannot: theta, eps, RoPE axes). */
#ifndef KILN_MODELS_CONFIG_H
#define KILN_MODELS_CONFIG_H

#include <stdbool.h>

/* path NULL or unreadable, key absent or not a number: false and *out untouched. */
bool kiln_config_number(const char *path, const char *key, double *out);
/* An integer array value: fills up to cap entries, returns the count (0 when absent/invalid). */
int kiln_config_ints(const char *path, const char *key, int *out, int cap);
/* A boolean value: false when absent. *found tells whether the key existed. */
bool kiln_config_bool(const char *path, const char *key, bool *found);

#endif
