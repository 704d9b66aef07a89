/* fuzz_model_configs.c - libFuzzer target over the config readers of a model folder (models/config.h and the
 * scheduler config, pipeline/schedule.h): any input gives KILN_OK or a clean error naming the file, no crash, no
 * leak; an accepted scheduler config gives finite sigmas in (0, 1] (plus one rounding) ending in 0. Seeds:
 * tests/fuzz/corpus/fuzz_model_configs/ (klein's scheduler config, the static / linear variants, refused keys,
 * wrong types). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "models/config.h"
#include "pipeline/schedule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/kiln-fuzz-config-%d.json", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    kiln_err err = {0};
    json_t *c = NULL;
    if (kiln_config_open(path, &c, &err) == KILN_OK) {
        if (!c) abort(); /* the file exists: either parsed or an error */
        (void)kiln_cfg_num(c, "shift", 1.0);
        (void)kiln_cfg_str(c, "time_shift_type");
        json_decref(c);
    } else if (c || !err.msg[0]) {
        abort();
    }
    kiln_sched_config sc;
    kiln_err e2 = {0};
    if (kiln_sched_config_read(path, &sc, &e2) == KILN_OK) {
        float sig[9];
        kiln_flux2_schedule_cfg_f32(&sc, 8, 1024, sig);
        for (int k = 0; k < 8; k++)
            if (!isfinite(sig[k]) || !(sig[k] > 0.0f) || sig[k] > 1.0001f) abort(); /* 1 + a rounding at t = 1 */
        if (sig[8] != 0.0f) abort();
    } else if (!e2.msg[0]) {
        abort();
    }
    unlink(path);
    return 0;
}
