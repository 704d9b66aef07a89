/* fake_models.h - a throwaway ComfyUI models folder for the tests that resolve model names (graph validation,
 * the executor, the server): the three klein files, empty, since those tests check names and never load
 * weights. Under /tmp, named by the test's tag and pid so that tests running side by side do not collide.
 *
 *     static char models[256];
 *     fake_models_make(models, sizeof models, "exec");   // /tmp/kiln-test-exec-models-<pid>
 *     ...
 *     test_rm_rf(models);
 */
#ifndef KILN_TESTS_FAKE_MODELS_H
#define KILN_TESTS_FAKE_MODELS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void fake_models_make(char *dir, size_t cap, const char *tag) {
    static const char *const subdirs[] = {"diffusion_models", "text_encoders", "vae"};
    static const char *const files[] = {"diffusion_models/flux-2-klein-4b.safetensors",
                                        "text_encoders/qwen_3_4b.safetensors", "vae/flux2-vae.safetensors"};
    char p[512];
    snprintf(dir, cap, "/tmp/kiln-test-%s-models-%d", tag, (int)getpid());
    mkdir(dir, 0755);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, subdirs[i]);
        mkdir(p, 0755);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        FILE *f = fopen(p, "w");
        if (f) fclose(f);
    }
}

/* rm -rf a folder the test made under /tmp. */
static inline void test_rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", path);
}

#endif
