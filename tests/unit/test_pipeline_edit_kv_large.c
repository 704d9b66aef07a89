/* test_pipeline_edit_kv_large.c - FLUX.2 [klein] 9B-KV with three references of different sizes (90x70, 1100x1000
 * over the pipeline's 1024^2 cap, 70x150; none a multiple of 16) against the official Flux2KleinKVPipeline
 * (golden kv_r3, tools/reference/make_kv_goldens.py): step 0 caches the 4,143 reference tokens' K/V, steps 1-3
 * attend to them; exact (>= 60 dB) and default precision (>= 40 dB). Apart from test_pipeline_edit_kv because the
 * large reference's VAE encode dominates its time. */
#include "edit_harness.h"

static void test_kv_r3(void) {
    run_case("kv_r3", false, true);
    run_case("kv_r3", false, false);
}

int main(void) {
    g_size = "9b-kv";
    RUN(test_kv_r3);
    return test_summary();
}
